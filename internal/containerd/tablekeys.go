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

// checkTableKeys refuses a document with a table of more than
// maxTableKeys keys, in one linear pass of go-toml's parser, before it is
// decoded. A document it cannot parse is left for the decoder to name
// the error.
func checkTableKeys(b []byte) error {
	var p unstable.Parser
	p.Reset(b)
	keys := 0
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			keys = 0
		case unstable.KeyValue:
			keys++
			if err := tooMany(&p, e, keys); err != nil {
				return err
			}
			if v := e.Value(); v != nil && v.Kind == unstable.InlineTable {
				if err := checkInline(&p, v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkInline applies the limit to an inline table and those it holds.
func checkInline(p *unstable.Parser, t *unstable.Node) error {
	n := 0
	for it := t.Children(); it.Next(); {
		kv := it.Node()
		n++
		if err := tooMany(p, kv, n); err != nil {
			return err
		}
		if v := kv.Value(); v != nil && v.Kind == unstable.InlineTable {
			if err := checkInline(p, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// tooMany is the error of the n-th key of a table, kv, past the limit.
func tooMany(p *unstable.Parser, kv *unstable.Node, n int) error {
	if n <= maxTableKeys {
		return nil
	}
	line := 0
	if k := kv.Key(); k.Next() && k.Node().Raw.Length > 0 {
		line = p.Shape(k.Node().Raw).Start.Line
	}
	return &positionError{line: line, column: 1, msg: fmt.Sprintf("more than %d keys in one table", maxTableKeys)}
}
