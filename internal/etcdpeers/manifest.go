package etcdpeers

// This file holds the flags of etcd's static pod manifest: the scalar
// entries of its sequences, as YAML reads them (yamlscalar.go), so that
// `- "--data-dir=/x"`, `- '--data-dir=/x'` and `command: [etcd,
// --data-dir=/x]` give the flag kubeadm's `- --data-dir=/x` does.

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// entry is one entry of a sequence: a scalar, or (bad) the text of one
// this reader could not read.
type entry struct {
	line  int
	value string
	bad   bool
}

// sequenceEntries are the entries of the manifest's sequences, in
// order: block ("- VALUE") and flow ("[A, B]", on one line or several).
// Mapping values, nested collections and block scalars are passed over.
// Linear in the manifest: each byte is read at most twice.
func sequenceEntries(manifest []byte) []entry {
	var out []entry
	sc := bufio.NewScanner(bytes.NewReader(manifest))
	sc.Buffer(nil, len(manifest)+1)
	inFlow := false // within a flow sequence that an earlier line opened
	for n := 1; sc.Scan(); n++ {
		s := strings.TrimLeft(sc.Text(), " \t")
		if !inFlow {
			var isEntry bool
			s, isEntry = blockValue(s)
			if s == "" || s[0] != '[' {
				switch v, _, kind := scalar(s, false); {
				case !isEntry || s == "":
				case kind == isScalar:
					out = append(out, entry{line: n, value: v})
				default:
					out = append(out, entry{line: n, value: s, bad: true})
				}
				continue
			}
			s = s[1:]
		}
		var es []entry
		es, inFlow = flowEntries(s, n)
		out = append(out, es...)
	}
	return out
}

// blockValue is what follows the indicators of a line: after each "- "
// (isEntry: the line is an entry, maybe of a nested sequence), and
// after a mapping key's ": " when what follows opens a flow sequence; s
// itself otherwise.
func blockValue(s string) (value string, isEntry bool) {
	for s == "-" || strings.HasPrefix(s, "- ") || strings.HasPrefix(s, "-\t") {
		s, isEntry = strings.TrimLeft(s[1:], " \t"), true
	}
	if s == "" || s[0] == '"' || s[0] == '\'' || s[0] == '[' {
		return s, isEntry
	}
	if _, v, ok := strings.Cut(s, ": "); ok && strings.HasPrefix(strings.TrimLeft(v, " \t"), "[") {
		return strings.TrimLeft(v, " \t"), false
	}
	return s, isEntry
}

// flowEntries reads the entries of a flow sequence from s (after its
// "[", or a line within it); open: it goes on past s. A nested
// collection ends the sequence: it and the rest are one bad entry.
func flowEntries(s string, n int) (out []entry, open bool) {
	for {
		s = strings.TrimLeft(s, " \t")
		switch {
		case s == "" || s[0] == '#':
			return out, true
		case s[0] == ']':
			return out, false
		case s[0] == ',':
			s = s[1:]
			continue
		}
		v, rest, kind := scalar(s, true)
		if kind != isScalar {
			return append(out, entry{line: n, value: s, bad: true}), false
		}
		out = append(out, entry{line: n, value: v})
		s = rest
	}
}

// flagValue is the value of the flag name (without dashes) among the
// manifest's entries: the last of "--name=V", "-name=V", or "--name"
// then the entry V, as etcd's flag parsing takes them; an error when an
// entry that names it cannot be read.
func flagValue(manifest []byte, name string) (value string, line int, found bool, err error) {
	es := sequenceEntries(manifest)
	for i, e := range es {
		if e.bad {
			if strings.Contains(e.value, "-"+name) {
				return "", 0, false, fmt.Errorf("line %d: an entry naming --%s that is not a YAML scalar on one line: %s", e.line, name, logline.QuoteClipped(e.value))
			}
			continue
		}
		flag, v, hasValue := strings.Cut(e.value, "=")
		if flag != "--"+name && flag != "-"+name {
			continue
		}
		if !hasValue {
			if i+1 == len(es) || es[i+1].bad {
				return "", 0, false, fmt.Errorf("line %d: --%s without a value", e.line, name)
			}
			v = es[i+1].value
		}
		value, line, found = v, e.line, true
	}
	return value, line, found, nil
}

// DataDir is the --data-dir of etcd's static pod manifest, or kubeadm's
// default when it has none. An error says why the flag that is there
// cannot be used: an entry not read, or a path that is not absolute.
func DataDir(manifest []byte) (string, error) {
	v, line, found, err := flagValue(manifest, "data-dir")
	switch {
	case err != nil:
		return "", err
	case !found:
		return DefaultDataDir, nil
	case !path.IsAbs(v):
		return "", fmt.Errorf("line %d: --data-dir %s is not an absolute path", line, logline.QuoteClipped(v))
	}
	return path.Clean(v), nil
}
