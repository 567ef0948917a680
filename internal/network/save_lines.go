package network

// This file holds the walks over an iptables-save's lines that its
// readers share: each costs a byte's look for a blank line and one
// IndexByte for any other, and keeps nothing for a line.

import (
	"bytes"
	"encoding/binary"
	"iter"
	"slices"
)

// CountRules counts the rule lines (lines starting with "-") of iptables-save
// output. It is the same measure as the reference's `grep -c '^-'`, taken from
// kubernetes-sigs/iptables-wrappers: the backend holding more rules is the one
// the host (and so the node) is really using.
func CountRules(save []byte) int {
	n := 0
	for range saveRules(save) {
		n++
	}
	return n
}

// ruleLine is a rule line of an iptables-save text: its bytes (without
// the newline), where they start in the text, and its table's position
// in the text (see RewriteDockerDNS).
type ruleLine struct {
	text         []byte
	start, table int
}

// saveRules yields the rule lines (those starting with '-', as for
// CountRules) of an iptables-save text.
func saveRules(save []byte) iter.Seq[ruleLine] {
	return func(yield func(ruleLine) bool) {
		table := 0
		for start := 0; start < len(save); {
			if save[start] == '\n' {
				start = skipNewlines(save, start)
				continue
			}
			end := len(save)
			if i := bytes.IndexByte(save[start:], '\n'); i >= 0 {
				end = start + i
			}
			switch line := save[start:end]; {
			case line[0] == '*':
				table++
			case line[0] == '-':
				if !yield(ruleLine{line, start, table}) {
					return
				}
			case line[0] != '#' && string(bytes.TrimSpace(line)) == "COMMIT":
				table++
			}
			start = end + 1
		}
	}
}

// skipNewlines returns the index of the first byte at or after i that is
// not a newline: eight bytes at a time, so that a save of blank lines
// costs its readers a few instructions per eight lines, not per line.
func skipNewlines(b []byte, i int) int {
	const newlines = 0x0a0a0a0a0a0a0a0a
	for i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:]) == newlines {
		i += 8
	}
	for i < len(b) && b[i] == '\n' {
		i++
	}
	return i
}

// lineMatcher finds the lines of a text holding any of its patterns
// (none holding a newline) by searching the whole text for each, not
// each line for every one: three searches a line were a seventh of the
// CPU of a capture of a million rules.
type lineMatcher struct {
	text []byte
	pats []string
	next []int // where each pattern is next found, at or after the last line asked
}

func newLineMatcher(text []byte, pats []string) *lineMatcher {
	return &lineMatcher{text: text, pats: pats, next: slices.Repeat([]int{-1}, len(pats))}
}

// in reports whether the line text[start:end] holds one of the patterns.
// Lines are asked in order.
func (m *lineMatcher) in(start, end int) bool {
	found := false
	for i, p := range m.pats {
		if m.next[i] < start {
			m.next[i] = len(m.text)
			if j := bytes.Index(m.text[start:], []byte(p)); j >= 0 {
				m.next[i] = start + j
			}
		}
		found = found || m.next[i] < end
	}
	return found
}
