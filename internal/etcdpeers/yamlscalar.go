package etcdpeers

// This file holds a reader of one YAML scalar (YAML 1.2, §7.3) on one
// line, plain or quoted, in block or flow context: what reading a static
// pod's flags needs (manifest.go), not a YAML parser. kubeadm writes a
// flag plain; a person may quote it. Linear in the line.

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// scalarKind is what scalar found at the start of a text.
type scalarKind int

const (
	isScalar scalarKind = iota
	// notScalar: something else YAML allows there (a mapping entry, a
	// nested collection, an alias, a tag, a block scalar, nothing).
	notScalar
	// badScalar: a quoted scalar this reader cannot read: unterminated
	// on its line, a bad escape, or text after its closing quote.
	badScalar
)

const flowIndicators = ",[]{}"

// scalar reads the scalar that s starts with (s has no leading blank),
// and the rest of s after it (in block context, after a comment too).
func scalar(s string, flow bool) (value, rest string, kind scalarKind) {
	if s == "" {
		return "", "", notScalar
	}
	switch s[0] {
	case '"':
		value, rest, kind = doubleQuoted(s[1:])
	case '\'':
		value, rest, kind = singleQuoted(s[1:])
	case '[', ']', '{', '}', ',', '#', '&', '*', '!', '|', '>', '%', '@', '`':
		return "", s, notScalar
	default:
		return plain(s, flow)
	}
	if kind != isScalar {
		return "", "", kind
	}
	rest = strings.TrimLeft(rest, " \t")
	if flow {
		return value, rest, isScalar
	}
	if rest != "" && rest[0] != '#' {
		return "", "", badScalar // `"a" b`, or `"a": b` (a mapping: not an entry this reader reads)
	}
	return value, "", isScalar
}

// plain reads a plain scalar: up to a comment, a flow indicator in flow
// context, or the end of s; a ": " in it makes it a mapping entry.
func plain(s string, flow bool) (string, string, scalarKind) {
	if (s[0] == '-' || s[0] == '?' || s[0] == ':') && (len(s) == 1 || s[1] == ' ' || s[1] == '\t') {
		return "", s, notScalar // an indicator, not the start of a scalar
	}
	end := len(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '#' && (s[i-1] == ' ' || s[i-1] == '\t') { // i > 0: s[0] is no '#'
			end = i
			break
		}
		if c == ':' && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t' || flow && strings.IndexByte(flowIndicators, s[i+1]) >= 0) {
			return "", s, notScalar // a mapping entry
		}
		if flow && strings.IndexByte(flowIndicators, c) >= 0 {
			end = i
			break
		}
	}
	value := strings.TrimRight(s[:end], " \t")
	if flow {
		return value, s[end:], isScalar
	}
	return value, "", isScalar
}

// singleQuoted reads a single-quoted scalar from after its quote: two
// quotes in a row stand for one, nothing else is escaped.
func singleQuoted(s string) (string, string, scalarKind) {
	var b strings.Builder
	for {
		before, after, ok := strings.Cut(s, "'")
		if !ok {
			return "", "", badScalar
		}
		b.WriteString(before)
		if !strings.HasPrefix(after, "'") {
			return b.String(), after, isScalar
		}
		b.WriteByte('\'')
		s = after[1:]
	}
}

// simpleEscapes are the one-character escapes of a double-quoted scalar
// and what they stand for (YAML 1.2 §5.7).
var simpleEscapes = map[byte]string{
	'0': "\x00", 'a': "\a", 'b': "\b", 't': "\t", '\t': "\t", 'n': "\n", 'v': "\v", 'f': "\f", 'r': "\r",
	'e': "\x1b", ' ': " ", '"': `"`, '/': "/", '\\': `\`, 'N': "\u0085", '_': "\u00a0", 'L': "\u2028", 'P': "\u2029",
}

// hexEscapes are the escapes of a code point, and their digits.
var hexEscapes = map[byte]int{'x': 2, 'u': 4, 'U': 8}

func doubleQuoted(s string) (string, string, scalarKind) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], isScalar
		case '\\':
			if i+1 == len(s) {
				return "", "", badScalar // a line continued: not on one line
			}
			e := s[i+1]
			if r, ok := simpleEscapes[e]; ok {
				b.WriteString(r)
				i++
				continue
			}
			n, ok := hexEscapes[e]
			if !ok || i+2+n > len(s) {
				return "", "", badScalar
			}
			v, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", "", badScalar
			}
			b.WriteRune(rune(v))
			i += 1 + n
		default:
			b.WriteByte(c)
		}
	}
	return "", "", badScalar
}
