package containerd

// This file holds the pure part: the edit itself, on bytes.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// Change says what configure_containerd wants in config.toml.
type Change struct {
	Snapshotter         string // "" = leave the snapshotter alone
	RestrictOOMScoreAdj bool   // true = ensure restrict_oom_score_adj = true; false = leave alone
}

// Result of Edit.
type Result struct {
	Config         []byte // the new file content (== input bytes when nothing changed)
	Changed        bool
	OldSnapshotter string // the snapshotter value found before the edit ("" if the key was absent)
	Version        int    // schema version detected: 2, 3 or 4
}

// maxConfigSize bounds the input. A containerd config is a few KiB. The
// bound matters because go-toml's duplicate-key check scans sibling tables
// linearly, so a file of many small tables decodes in quadratic time:
// measured, 256 KiB of `[a.bN]` headers takes 0.6 s and 1 MiB takes 12 s,
// and Edit decodes twice. It also keeps far below the 4 GiB where the
// parser's uint32 byte ranges would wrap.
const maxConfigSize = 256 << 10

// Edit applies ch to a containerd config file's bytes.
func Edit(config []byte, ch Change) (Result, error) {
	res, _, err := edit(config, ch)
	return res, err
}

// schema names the keys configure_containerd touches in one config version.
type schema struct {
	snapshotter []string
	restrictOOM []string
}

func schemaFor(version int64) (schema, bool) {
	switch version {
	case 2:
		return schema{
			snapshotter: []string{"plugins", "io.containerd.grpc.v1.cri", "containerd", "snapshotter"},
			restrictOOM: []string{"plugins", "io.containerd.grpc.v1.cri", "restrict_oom_score_adj"},
		}, true
	case 3, 4:
		// containerd 2.0 split the CRI plugin: image settings and runtime
		// settings now live in two plugins. Version 4 (containerd 2.2)
		// keeps these keys; kind handles it like 3.
		return schema{
			snapshotter: []string{"plugins", "io.containerd.cri.v1.images", "snapshotter"},
			restrictOOM: []string{"plugins", "io.containerd.cri.v1.runtime", "restrict_oom_score_adj"},
		}, true
	}
	return schema{}, false
}

// assignment is one key Edit must make hold a value.
type assignment struct {
	path  []string
	token string // the TOML text written for the value
	value any    // what token decodes to, for the read-back check
}

// splice replaces input bytes [start, end) with text; start == end inserts.
type splice struct {
	start, end int
	text       string
}

// edit is Edit, also returning the splices it applied so that tests can
// check that nothing outside them moved.
func edit(config []byte, ch Change) (Result, []splice, error) {
	if len(config) > maxConfigSize {
		return Result{}, nil, fmt.Errorf("config is %d bytes, more than the %d this tool accepts", len(config), maxConfigSize)
	}
	if ch.Snapshotter != "" {
		if err := checkSnapshotterName(ch.Snapshotter); err != nil {
			return Result{}, nil, err
		}
	}
	// The parser reports positions by comparing slice capacities, so the
	// input must not extend past its length.
	config = config[:len(config):len(config)]

	// A strict decode first: it rejects everything TOML forbids (duplicate
	// keys, tables defined twice, dotted keys reopening tables), which the
	// syntax-level parser used for splicing does not check.
	before, err := decode(config)
	if err != nil {
		return Result{}, nil, err
	}
	sc, err := scanDocument(config)
	if err != nil {
		return Result{}, nil, err
	}

	version, err := configVersion(before, sc)
	if err != nil {
		return Result{}, nil, err
	}
	sch, _ := schemaFor(version)
	res := Result{Config: config, Version: int(version)}

	oldSnap, snapFound, err := lookup(before, sch.snapshotter, sc)
	if err != nil && ch.Snapshotter != "" {
		return Result{}, nil, err
	}
	if s, ok := oldSnap.(string); ok {
		res.OldSnapshotter = s
	}
	var want []assignment
	if ch.Snapshotter != "" {
		if snapFound {
			if _, ok := oldSnap.(string); !ok {
				return Result{}, nil, sc.errorAt(sch.snapshotter, "%s is %s, want a string", formatKeyPath(sch.snapshotter), describe(oldSnap))
			}
		}
		if !snapFound || res.OldSnapshotter != ch.Snapshotter {
			// validSnapshotterName admits nothing that needs escaping.
			want = append(want, assignment{path: sch.snapshotter, token: `"` + ch.Snapshotter + `"`, value: ch.Snapshotter})
		}
	}
	if ch.RestrictOOMScoreAdj {
		old, found, err := lookup(before, sch.restrictOOM, sc)
		if err != nil {
			return Result{}, nil, err
		}
		b, isBool := old.(bool)
		if found && !isBool {
			return Result{}, nil, sc.errorAt(sch.restrictOOM, "%s is %s, want a boolean", formatKeyPath(sch.restrictOOM), describe(old))
		}
		if !b {
			want = append(want, assignment{path: sch.restrictOOM, token: "true", value: true})
		}
	}
	if len(want) == 0 {
		return res, nil, nil
	}

	splices, err := sc.plan(want)
	if err != nil {
		return Result{}, nil, err
	}
	out := applySplices(config, splices)
	if err := verify(out, before, want); err != nil {
		return Result{}, nil, err
	}
	res.Config = out
	res.Changed = true
	return res, splices, nil
}

func checkSnapshotterName(s string) error {
	if !validSnapshotterName(s) {
		return fmt.Errorf("invalid snapshotter name %s: want lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", logline.QuoteClipped(s))
	}
	return nil
}

// validSnapshotterName matches ^[a-z0-9][a-z0-9._-]*$. The name is written
// into a TOML string unescaped, which this alphabet makes safe.
func validSnapshotterName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// positionError is a problem at a place in the document. The caller
// prefixes the file name.
type positionError struct {
	line, column int
	msg          string
}

func (e *positionError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.line, e.column, e.msg)
}

func decode(b []byte) (map[string]any, error) {
	if err := checkTableKeys(b); err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := toml.Unmarshal(b, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			return nil, &positionError{line: line, column: col, msg: strings.TrimPrefix(de.Error(), "toml: ")}
		}
		return nil, fmt.Errorf("invalid TOML: %w", err)
	}
	if doc == nil {
		doc = map[string]any{}
	}
	return doc, nil
}

func configVersion(doc map[string]any, sc *scan) (int64, error) {
	v, ok := doc["version"]
	if !ok {
		return 0, errors.New("unsupported containerd config version 1 (want 2, 3 or 4): there is no top-level version key, which containerd reads as version 1")
	}
	n, ok := v.(int64)
	if !ok {
		return 0, sc.errorAt([]string{"version"}, "unsupported containerd config version %s (want 2, 3 or 4): not an integer", describe(v))
	}
	if _, ok := schemaFor(n); !ok {
		return 0, sc.errorAt([]string{"version"}, "unsupported containerd config version %d (want 2, 3 or 4)", n)
	}
	return n, nil
}

// lookup reads path from a decoded document. A missing key is not an error;
// a non-table where a table must be is.
func lookup(doc map[string]any, path []string, sc *scan) (value any, found bool, err error) {
	tbl := doc
	for i, k := range path[:len(path)-1] {
		v, ok := tbl[k]
		if !ok {
			return nil, false, nil
		}
		sub, ok := v.(map[string]any)
		if !ok {
			p := path[:i+1]
			return nil, false, sc.errorAt(p, "%s is %s, want a table (needed for %s)", formatKeyPath(p), describe(v), formatKeyPath(path))
		}
		tbl = sub
	}
	v, ok := tbl[path[len(path)-1]]
	return v, ok, nil
}

func describe(v any) string {
	switch v := v.(type) {
	case string:
		return "the string " + logline.QuoteClipped(v)
	case bool:
		return fmt.Sprintf("the boolean %t", v)
	case int64:
		return fmt.Sprintf("the integer %d", v)
	case float64:
		return fmt.Sprintf("the float %v", v)
	case map[string]any:
		return "a table"
	case []any:
		return "an array"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

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
	path    []string // absolute: section path + dotted key
	rawKey  []string // the key's parts as written, quotes included
	start   int
	lineEnd int
	value   valueRef // kind Invalid unless the value is a string, boolean or inline table
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
			start := len(sc.parts)
			_, first, last := sc.keyPath(&key, false)
			path := sc.parts[start:len(sc.parts):len(sc.parts)]
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
			from := len(sc.parts)
			sc.parts = append(sc.parts, sc.sections[cur].path...)
			raw, _, _ := sc.keyPath(&key, true)
			path := sc.parts[from:len(sc.parts):len(sc.parts)]
			start := int(expr.Raw.Offset)
			sc.kvs = append(sc.kvs, keyValue{
				section: cur,
				path:    path,
				rawKey:  raw,
				start:   start,
				lineEnd: lineEnd(data, start+int(expr.Raw.Length)),
				value:   newValueRef(expr.Value()),
			})
			sc.sections[cur].lastKV = len(sc.kvs) - 1
		}
	}
	if err := p.Error(); err != nil {
		// decode accepted the document, so this means the two parsers
		// disagree; still report it in the usual form.
		var pe *unstable.ParserError
		if errors.As(err, &pe) {
			if off, ok := offsetIn(data, pe.Highlight); ok {
				line, col := position(data, off)
				return nil, &positionError{line: line, column: col, msg: pe.Message}
			}
		}
		return nil, fmt.Errorf("invalid TOML: %w", err)
	}
	return sc, nil
}

// keyPath decodes a (possibly dotted, possibly quoted) key onto sc.parts
// and returns where its first part starts and where its last ends, and
// with wantRaw its parts as written, quotes included (kept in sc.raws).
func (sc *scan) keyPath(it *unstable.Iterator, wantRaw bool) (raw []string, first, last int) {
	first = -1
	from := len(sc.raws)
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
			raw = sc.raws[from:len(sc.raws):len(sc.raws)]
		}
		if first < 0 {
			first = int(n.Raw.Offset)
		}
		last = int(n.Raw.Offset + n.Raw.Length)
	}
	return raw, first, last
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

// keyParts decodes a key on its own (an inline table's).
func keyParts(it *unstable.Iterator) []string {
	var path []string
	for it.Next() {
		path = append(path, string(it.Node().Data))
	}
	return path
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
			key := kv.Key()
			v.items = append(v.items, inlineItem{key: keyParts(&key), value: newValueRef(kv.Value())})
		}
		return v
	}
	return valueRef{}
}

// errorAt formats an error at the definition of path when the scan knows
// where that is, and without a position otherwise.
func (sc *scan) errorAt(path []string, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	for _, kv := range sc.kvs {
		if equalPath(kv.path, path) {
			line, col := position(sc.data, kv.start)
			return &positionError{line: line, column: col, msg: msg}
		}
	}
	for _, s := range sc.sections[1:] {
		if s.array && equalPath(s.path, path) {
			line, col := position(sc.data, s.start)
			return &positionError{line: line, column: col, msg: msg}
		}
	}
	return errors.New(msg)
}

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
		if raw, found, in := findIn(kv.path, &kv.value, path); found || in {
			return raw, found, in
		}
	}
	return unstable.Range{}, false, false
}

func findIn(at []string, v *valueRef, path []string) (raw unstable.Range, found, inline bool) {
	if equalPath(at, path) {
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
		if s.array || !equalPath(s.path, parent) {
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
		if s.array || len(s.path) >= len(parent) || len(kv.path) <= len(parent) || !hasPrefix(kv.path, parent) {
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
	eol := sc.eol
	if n := len(d); n > 0 && d[n-1] == '\n' {
		eol = sc.lineEOL(n)
	}
	var b strings.Builder
	blank := endsWithBlankLine(d)
	if n := len(d); n > 0 && d[n-1] != '\n' {
		b.WriteString(eol)
	}
	for _, a := range as {
		if len(d) > 0 || b.Len() > 0 {
			if !blank {
				b.WriteString(eol)
			}
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

func position(d []byte, off int) (line, col int) {
	line = 1 + bytes.Count(d[:off], []byte("\n"))
	col = off - (bytes.LastIndexByte(d[:off], '\n') + 1) + 1
	return line, col
}

// offsetIn locates sub inside d the way the parser does, by capacity,
// refusing anything that is not a slice of d.
func offsetIn(d, sub []byte) (int, bool) {
	off := cap(d) - cap(sub)
	if off < 0 || off+len(sub) > len(d) {
		return 0, false
	}
	return off, true
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

// verify re-reads the edited document and demands that it equals the
// original with exactly the assignments applied, so a planning mistake
// fails loudly instead of reaching disk.
func verify(out []byte, before map[string]any, want []assignment) error {
	after, err := decode(out)
	if err != nil {
		return fmt.Errorf("the edited config would not parse (%v); not writing it", err)
	}
	for _, a := range want {
		set(before, a.path, a.value)
	}
	if !sameValue(before, after) {
		return errors.New("the edited config does not read back as intended; not writing it")
	}
	return nil
}

func set(doc map[string]any, path []string, v any) {
	tbl := doc
	for _, k := range path[:len(path)-1] {
		sub, ok := tbl[k].(map[string]any)
		if !ok {
			sub = map[string]any{}
			tbl[k] = sub
		}
		tbl = sub
	}
	tbl[path[len(path)-1]] = v
}

// sameValue is reflect.DeepEqual for decoded TOML, except that NaN equals
// NaN: `x = nan` in a config must not fail verification.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !sameValue(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	case float64:
		b, ok := b.(float64)
		return ok && (math.Float64bits(a) == math.Float64bits(b) || math.IsNaN(a) && math.IsNaN(b))
	}
	return reflect.DeepEqual(a, b)
}

func equalPath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// hasPrefix reports whether path starts with prefix.
func hasPrefix(path, prefix []string) bool {
	return len(path) >= len(prefix) && equalPath(path[:len(prefix)], prefix)
}

func formatKeyPath(path []string) string {
	parts := make([]string, len(path))
	for i, k := range path {
		parts[i] = formatKey(k)
	}
	return strings.Join(parts, ".")
}

// formatKey writes a key bare when TOML allows it, else as a basic string.
func formatKey(k string) string {
	bare := k != ""
	for i := 0; i < len(k) && bare; i++ {
		c := k[i]
		bare = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	if bare {
		return k
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range k {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
