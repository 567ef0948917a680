package containerd

// This file holds the syntax-level scan of a TOML document: where each
// section and key/value sits, as byte offsets, so that an edit can splice.

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/pelletier/go-toml/v2/unstable"
)

// scan is the syntax-level view of a document: where each section and each
// top-level key/value sits, so values can be replaced and lines inserted
// without re-rendering anything else.
type scan struct {
	data     []byte
	eol      string
	sections []section
	kvs      []keyValue

	// text is data as a string: key parts as written are substrings of
	// it, and so are decoded ones that read the same (bare keys), rather
	// than a string each.
	text string
	// parts holds every key path's parts back to back; each path is a
	// capacity-limited slice of it (a few allocations per document
	// instead of a few per key; a path keeps its array when parts grows).
	// raws does the same for the keys' parts as written.
	parts, raws []string
}

// section is the run of key/values after one [header] or [[header]], or
// before the first header (index 0, empty path).
type section struct {
	path    []string
	array   bool
	start   int // offset of the first key of the header
	lineEnd int // offset just past the header line
	indent  string
	lastKV  int // index in scan.kvs, -1 when the section has none
}

type keyValue struct {
	section int
	// key is the dotted key's parts, relative to the section: its path is
	// the section's path and then key (kept apart, so that a deep header
	// is not copied once for each of its keys).
	key     []string
	rawKey  []string // key's parts as written, quotes included
	start   int
	lineEnd int
	value   valueRef // kind Invalid unless the value is a string, boolean or inline table
	// valueAt and end are where the value, of any kind, starts and
	// ends (Redact masks it).
	valueAt, end int
}

// valueRef keeps what plan needs of a value node, which the parser
// invalidates when it moves to the next expression. It is kept by value
// (a document has a dozen or more), its kind Invalid for the values plan
// never edits.
type valueRef struct {
	kind  unstable.Kind
	raw   unstable.Range
	items []inlineItem // for inline tables
}

type inlineItem struct {
	key   []string
	value valueRef
}

func scanDocument(data []byte) (*scan, error) {
	// Each header and each key/value starts a line of its own: sized by
	// the lines, sections and kvs are allocated once.
	lines, headers := countLines(data)
	sc := &scan{
		data:     data,
		eol:      documentEOL(data),
		sections: make([]section, 1, 1+headers),
		kvs:      make([]keyValue, 0, lines-headers),
		text:     string(data),
		parts:    make([]string, 0, 256),
		raws:     make([]string, 0, 64),
	}
	sc.sections[0].lastKV = -1
	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		expr := p.Expression()
		switch expr.Kind {
		case unstable.Table, unstable.ArrayTable:
			key := expr.Key()
			path, _, first, last := sc.keyPath(&key, false)
			sc.sections = append(sc.sections, section{
				path:    path,
				array:   expr.Kind == unstable.ArrayTable,
				start:   first,
				lineEnd: lineEnd(data, last),
				indent:  indentAt(sc.text, first),
				lastKV:  -1,
			})
		case unstable.KeyValue:
			cur := len(sc.sections) - 1
			key := expr.Key()
			path, raw, _, last := sc.keyPath(&key, true)
			start, end := int(expr.Raw.Offset), int(expr.Raw.Offset+expr.Raw.Length)
			sc.kvs = append(sc.kvs, keyValue{
				section: cur,
				key:     path,
				rawKey:  raw,
				start:   start,
				lineEnd: lineEnd(data, end),
				value:   newValueRef(expr.Value()),
				valueAt: valueStart(data, last),
				end:     end,
			})
			sc.sections[cur].lastKV = len(sc.kvs) - 1
		}
	}
	if err := p.Error(); err != nil {
		// decode accepted the document, so this means the two parsers
		// disagree; still report it in the usual form.
		var pe *unstable.ParserError
		// Its highlight is located as the parser does, by capacity,
		// when it is a slice of data.
		if errors.As(err, &pe) {
			if off := cap(data) - cap(pe.Highlight); off >= 0 && off+len(pe.Highlight) <= len(data) {
				return nil, errorAtOffset(data, off, contentFree(pe.Message))
			}
		}
		return nil, errors.New("invalid TOML: " + contentFree(err.Error()))
	}
	return sc, nil
}

// keyPath decodes a (possibly dotted, possibly quoted) key onto sc.parts:
// its parts there, where its first part starts and where its last ends,
// and with wantRaw its parts as written, quotes included (kept in sc.raws).
func (sc *scan) keyPath(it *unstable.Iterator, wantRaw bool) (path, raw []string, first, last int) {
	first = -1
	from, rawFrom := len(sc.parts), len(sc.raws)
	for it.Next() {
		n := it.Node()
		asWritten := sc.text[n.Raw.Offset : n.Raw.Offset+n.Raw.Length]
		part := asWritten
		if string(n.Data) != asWritten {
			// Quoted: the part is what the quotes hold, unescaped; a
			// new string only when an escape made it differ.
			if inner := unquote(asWritten); string(n.Data) == inner {
				part = inner
			} else {
				part = string(n.Data)
			}
		}
		sc.parts = append(sc.parts, part)
		if wantRaw {
			sc.raws = append(sc.raws, asWritten)
			raw = sc.raws[rawFrom:len(sc.raws):len(sc.raws)]
		}
		if first < 0 {
			first = int(n.Raw.Offset)
		}
		last = int(n.Raw.Offset + n.Raw.Length)
	}
	return sc.parts[from:len(sc.parts):len(sc.parts)], raw, first, last
}

// unquote is s without the quotes around it, when it has them.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// countLines counts data's lines, and those of them that start, after
// blanks, with '[' (each header is one of those).
func countLines(data []byte) (lines, headers int) {
	for line := range bytes.Lines(data) {
		lines++
		if l := bytes.TrimLeft(line, " \t"); len(l) > 0 && l[0] == '[' {
			headers++
		}
	}
	return lines, headers
}

func newValueRef(n *unstable.Node) valueRef {
	switch n.Kind {
	case unstable.String, unstable.Bool:
		return valueRef{kind: n.Kind, raw: n.Raw}
	case unstable.InlineTable:
		v := valueRef{kind: n.Kind, raw: n.Raw}
		it := n.Children()
		for it.Next() {
			kv := it.Node()
			if kv.Kind != unstable.KeyValue {
				continue
			}
			var key []string
			for k := kv.Key(); k.Next(); {
				key = append(key, string(k.Node().Data))
			}
			v.items = append(v.items, inlineItem{key: key, value: newValueRef(kv.Value())})
		}
		return v
	}
	return valueRef{}
}

// errorAt formats an error at the definition of path when the scan knows
// where that is, and without a position otherwise.
func (sc *scan) errorAt(path []string, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	for i := range sc.kvs {
		// kv's path, its section's and then its key, is path.
		kv := &sc.kvs[i]
		if table := sc.sections[kv.section].path; len(table)+len(kv.key) == len(path) && startsWith(path, table, kv.key) {
			return errorAtOffset(sc.data, kv.start, msg)
		}
	}
	for _, s := range sc.sections[1:] {
		if s.array && slices.Equal(s.path, path) {
			return errorAtOffset(sc.data, s.start, msg)
		}
	}
	return errors.New(msg)
}

// startsWith reports whether path starts with first and then second.
func startsWith(path, first, second []string) bool {
	return hasPrefix(path, first) && hasPrefix(path[len(first):], second)
}

// valueStart is the offset of a key/value's value: past the '=' after
// its key, which ends at keyEnd, and the blanks after it.
func valueStart(data []byte, keyEnd int) int {
	i := keyEnd + bytes.IndexByte(data[keyEnd:], '=') + 1
	for i < len(data) && (data[i] == ' ' || data[i] == '\t') {
		i++
	}
	return i
}
