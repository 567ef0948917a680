package containerd

// This file holds splice planning: where each assignment goes in the scanned
// document, and applying the splices to the bytes.

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// plan turns assignments into splices: replace the value token where the
// key exists, else add a line to the table that holds its siblings, else
// append a new table at the end.
func (sc *scan) plan(want []assignment) ([]splice, error) {
	var out []splice
	var appended []assignment
	for _, a := range want {
		if raw, found, inline := sc.findValue(a.path); found {
			out = append(out, splice{start: int(raw.Offset), end: int(raw.Offset + raw.Length), text: a.token})
			continue
		} else if inline {
			return nil, fmt.Errorf("cannot add %s: its table is an inline table, which this tool does not edit", formatKeyPath(a.path))
		}
		parent, key := a.path[:len(a.path)-1], a.path[len(a.path)-1]
		if at, indent, eol, ok := sc.explicitTable(parent); ok {
			out = append(out, sc.insertLine(at, indent+formatKey(key)+" = "+a.token, eol))
			continue
		}
		if at, indent, eol, rel, ok := sc.dottedTable(parent); ok {
			// TOML forbids a [header] for a table that dotted keys made, so
			// the key joins those dotted keys instead.
			out = append(out, sc.insertLine(at, indent+strings.Join(rel, ".")+"."+formatKey(key)+" = "+a.token, eol))
			continue
		}
		appended = append(appended, a)
	}
	if len(appended) > 0 {
		out = append(out, sc.appendTables(appended))
	}
	// A stable sort keeps lines inserted at one point in the order planned,
	// and a table appended at the end after lines inserted there.
	sort.SliceStable(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out, nil
}

// findValue finds the value token of path. inline reports that a table on
// the way is an inline table, which plan cannot add keys to.
func (sc *scan) findValue(path []string) (raw unstable.Range, found, inline bool) {
	for i := range sc.kvs {
		kv := &sc.kvs[i]
		if kv.value.kind == unstable.Invalid {
			continue
		}
		// findIn finds path only at or under kv's own path: the path is
		// put together for the few kvs on the way.
		table := sc.sections[kv.section].path
		if !startsWith(path, table, kv.key) {
			continue
		}
		if raw, found, in := findIn(slices.Concat(table, kv.key), &kv.value, path); found || in {
			return raw, found, in
		}
	}
	return unstable.Range{}, false, false
}

func findIn(at []string, v *valueRef, path []string) (raw unstable.Range, found, inline bool) {
	if slices.Equal(at, path) {
		if v.kind == unstable.String || v.kind == unstable.Bool {
			return v.raw, true, false
		}
		return unstable.Range{}, false, false
	}
	if v.kind != unstable.InlineTable || !hasPrefix(path, at) {
		return unstable.Range{}, false, false
	}
	for i := range v.items {
		it := &v.items[i]
		if it.value.kind == unstable.Invalid {
			continue
		}
		sub := append(append([]string(nil), at...), it.key...)
		if raw, found, _ := findIn(sub, &it.value, path); found {
			return raw, true, true
		}
	}
	return unstable.Range{}, false, true
}

// explicitTable finds the [parent] section and where a new key line goes:
// after its last key/value, in that line's indentation.
func (sc *scan) explicitTable(parent []string) (at int, indent, eol string, ok bool) {
	for _, s := range sc.sections[1:] {
		if s.array || !slices.Equal(s.path, parent) {
			continue
		}
		if s.lastKV < 0 {
			// Nothing to align with: indent one step past the header, as
			// kind's and containerd's own files do.
			return s.lineEnd, s.indent + "  ", sc.lineEOL(s.lineEnd), true
		}
		kv := sc.kvs[s.lastKV]
		return kv.lineEnd, indentAt(sc.text, kv.start), sc.lineEOL(kv.lineEnd), true
	}
	return 0, "", "", false
}

// dottedTable finds parent when dotted keys made it inside some section
// (`[plugins."io.containerd.grpc.v1.cri"]` + `containerd.snapshotter = ...`),
// and returns the key prefix, as written, relative to that section.
func (sc *scan) dottedTable(parent []string) (at int, indent, eol string, rel []string, ok bool) {
	for i := len(sc.kvs) - 1; i >= 0; i-- {
		kv := sc.kvs[i]
		s := sc.sections[kv.section]
		// kv's path, s.path and then kv.key, is longer than parent and
		// starts with it, s.path a proper prefix of parent.
		if s.array || len(s.path) >= len(parent) || len(s.path)+len(kv.key) <= len(parent) ||
			!hasPrefix(parent, s.path) || !hasPrefix(kv.key, parent[len(s.path):]) {
			continue
		}
		// Reuse the document's own spelling of the shared key prefix.
		rel = append([]string(nil), kv.rawKey[:len(parent)-len(s.path)]...)
		return kv.lineEnd, indentAt(sc.text, kv.start), sc.lineEOL(kv.lineEnd), rel, true
	}
	return 0, "", "", nil, false
}

// insertLine inserts one line at at, which is either just past a newline
// or the end of a document that lacks a final newline.
func (sc *scan) insertLine(at int, line, eol string) splice {
	if at > 0 && sc.data[at-1] != '\n' {
		return splice{start: at, end: at, text: eol + line}
	}
	return splice{start: at, end: at, text: line + eol}
}

// appendTables adds a new [table] per assignment at the end of the file,
// after a blank line.
func (sc *scan) appendTables(as []assignment) splice {
	d := sc.data
	eol := sc.lineEOL(len(d))
	var b strings.Builder
	blank := endsWithBlankLine(d)
	if n := len(d); n > 0 && d[n-1] != '\n' {
		b.WriteString(eol)
	}
	for _, a := range as {
		if (len(d) > 0 || b.Len() > 0) && !blank {
			b.WriteString(eol)
		}
		blank = false
		parent, key := a.path[:len(a.path)-1], a.path[len(a.path)-1]
		b.WriteString("[" + formatKeyPath(parent) + "]" + eol)
		b.WriteString("  " + formatKey(key) + " = " + a.token + eol)
	}
	return splice{start: len(d), end: len(d), text: b.String()}
}

func endsWithBlankLine(d []byte) bool {
	d = bytes.TrimSuffix(d, []byte("\n"))
	d = bytes.TrimSuffix(d, []byte("\r"))
	if len(d) == 0 {
		return true
	}
	return d[len(d)-1] == '\n'
}

// lineEOL is the line ending that ends just before offset end, so inserted
// lines match their neighbours in a CRLF file.
func (sc *scan) lineEOL(end int) string {
	if end >= 2 && sc.data[end-1] == '\n' && sc.data[end-2] == '\r' {
		return "\r\n"
	}
	if end >= 1 && sc.data[end-1] == '\n' {
		return "\n"
	}
	return sc.eol
}

func documentEOL(d []byte) string {
	if i := bytes.IndexByte(d, '\n'); i > 0 && d[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// lineEnd returns the offset just past the newline ending the line that
// contains off, or len(d) on a last line without one. After a value or a
// header only blanks and a comment can follow on that line, so the first
// newline is the right one.
func lineEnd(d []byte, off int) int {
	if i := bytes.IndexByte(d[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(d)
}

// indentAt is the blanks that start the line holding off, in text (a
// substring of it, not a copy).
func indentAt(text string, off int) string {
	start := strings.LastIndexByte(text[:off], '\n') + 1
	i := start
	for i < off && (text[i] == ' ' || text[i] == '\t') {
		i++
	}
	return text[start:i]
}

// errorAtOffset is a positionError at offset off of d.
func errorAtOffset(d []byte, off int, msg string) error {
	line := 1 + bytes.Count(d[:off], []byte("\n"))
	col := off - (bytes.LastIndexByte(d[:off], '\n') + 1) + 1
	return &positionError{line: line, column: col, msg: msg}
}

func applySplices(d []byte, ss []splice) []byte {
	n := len(d)
	for _, s := range ss {
		n += len(s.text) - (s.end - s.start)
	}
	out := make([]byte, 0, n)
	prev := 0
	for _, s := range ss {
		out = append(out, d[prev:s.start]...)
		out = append(out, s.text...)
		prev = s.end
	}
	return append(out, d[prev:]...)
}
