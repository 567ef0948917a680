package containerd

import (
	"fmt"

	"github.com/pelletier/go-toml/v2/unstable"
)

// maxTableKeys is the most keys one table of the config may hold, inline
// tables and the keys dotted below a table included. go-toml checks each
// key against the table's others one by one: 43k keys in one table, well
// under maxConfigSize, cost seconds of CPU for every parse.
// containerd's own tables hold a few dozen.
const maxTableKeys = 2048

// maxKeyParts is the most parts all the config's keys and headers may have
// together (`[a.b]` and `a.b = 1` have two each). go-toml looks up each
// part among what the document defined before (every table after the
// part's parent), so a decode costs up to parts × parts: 32k headers
// `[tN]` in 256 KiB took 4 s of CPU, a header of 60k parts with 2000 keys
// 2.6 s. containerd 2.3.4's `config default` has 288 parts (8 KiB),
// kind's config 45; the costliest shape at the cap, 4093 tables of a key
// each, took 0.05 s with a cluster running beside it
// (BenchmarkDecodeKeyParts).
const maxKeyParts = 8192

// checkTableKeys refuses a document with a table of more than
// maxTableKeys keys, or more than maxKeyParts key parts in all, in one
// linear pass of go-toml's parser, before it is decoded. A document it
// cannot parse is left for the decoder to name the error.
func checkTableKeys(b []byte) error {
	var p unstable.Parser
	p.Reset(b)
	keys, parts := 0, 0
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			keys = 0
			if err := countParts(&p, e, &parts); err != nil {
				return err
			}
		case unstable.KeyValue:
			keys++
			if err := checkKey(&p, e, keys, &parts); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkKey applies the limits to kv, the n-th key of its table, and to
// the inline tables its value holds.
func checkKey(p *unstable.Parser, kv *unstable.Node, n int, parts *int) error {
	if n > maxTableKeys {
		k := kv.Key()
		k.Next()
		return &positionError{line: lineOf(p, k.Node()), column: 1, msg: fmt.Sprintf("more than %d keys in one table", maxTableKeys)}
	}
	if err := countParts(p, kv, parts); err != nil {
		return err
	}
	if v := kv.Value(); v != nil && v.Kind == unstable.InlineTable {
		n := 0
		for it := v.Children(); it.Next(); {
			n++
			if err := checkKey(p, it.Node(), n, parts); err != nil {
				return err
			}
		}
	}
	return nil
}

// countParts adds the parts of e's key (a header's or a key/value's) to
// *parts, and is the error at the first part past maxKeyParts.
func countParts(p *unstable.Parser, e *unstable.Node, parts *int) error {
	for k := e.Key(); k.Next(); {
		if *parts++; *parts > maxKeyParts {
			return &positionError{line: lineOf(p, k.Node()), column: 1, msg: fmt.Sprintf("more than %d key parts in the config", maxKeyParts)}
		}
	}
	return nil
}

// lineOf is the line of a key part, 0 when there is none or the parser
// gave it no place.
func lineOf(p *unstable.Parser, n *unstable.Node) int {
	if !n.Valid() || n.Raw.Length == 0 {
		return 0
	}
	return p.Shape(n.Raw).Start.Line
}
