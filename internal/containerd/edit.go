package containerd

// This file holds the pure part: the edit itself, on bytes.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2"

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
	if err := checkSnapshotterName(ch.Snapshotter); err != nil {
		return Result{}, nil, err
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
	oldSnap, snapFound, err := lookup(before, sch.snapshotter, sc)
	if err != nil && ch.Snapshotter != "" {
		return Result{}, nil, err
	}
	snap, isString := oldSnap.(string)
	res := Result{Config: config, OldSnapshotter: snap, Version: int(version)}
	var want []assignment
	if ch.Snapshotter != "" {
		if snapFound && !isString {
			return Result{}, nil, sc.errorAt(sch.snapshotter, "%s is %s, want a string", formatKeyPath(sch.snapshotter), describe(oldSnap))
		}
		if snap != ch.Snapshotter {
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
	res.Config = applySplices(config, splices)
	if err := verify(res.Config, before, want); err != nil {
		return Result{}, nil, err
	}
	res.Changed = true
	return res, splices, nil
}

// checkSnapshotterName checks a snapshotter to set; "" leaves it alone.
func checkSnapshotterName(s string) error {
	if s != "" && !validSnapshotterName(s) {
		return fmt.Errorf("invalid snapshotter name %s: want lowercase letters, digits, '.', '_' or '-', starting with a letter or digit, at most %d bytes", logline.QuoteClipped(s), maxSnapshotterName)
	}
	return nil
}

// maxSnapshotterName is the longest name a snapshotter can have: containerd
// keeps each snapshotter's state in a directory named
// io.containerd.snapshotter.v1.NAME, and a file name has at most 255 bytes.
const maxSnapshotterName = 255 - len("io.containerd.snapshotter.v1.")

// validSnapshotterName matches ^[a-z0-9][a-z0-9._-]*$, at most
// maxSnapshotterName bytes. The name is written into a TOML string
// unescaped, which this alphabet makes safe.
func validSnapshotterName(s string) bool {
	if s == "" || len(s) > maxSnapshotterName {
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
			return nil, &positionError{line: line, column: col, msg: contentFree(strings.TrimPrefix(de.Error(), "toml: "))}
		}
		return nil, errors.New("invalid TOML: " + contentFree(err.Error()))
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
		// Not quoted: the file can hold credentials (contentFree).
		return fmt.Sprintf("a string of %d bytes", len(v))
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
