package e2e

import (
	"fmt"
	"strconv"
	"strings"
)

// parseShowEnvironment parses `systemctl show-environment`: one KEY=VALUE a
// line, the value bare when it is plain and shell-quoted otherwise (systemd
// 252 writes $'...' with C escapes; '...' and "..." are accepted too).
func parseShowEnvironment(s string) (map[string]string, error) {
	env := map[string]string{}
	for n, line := range strings.Split(s, "\n") {
		if line == "" {
			continue
		}
		key, raw, ok := strings.Cut(line, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("show-environment line %d: no KEY=: %q", n+1, line)
		}
		val, err := unquoteShellWord(raw)
		if err != nil {
			return nil, fmt.Errorf("show-environment line %d (%s): %w", n+1, key, err)
		}
		env[key] = val
	}
	return env, nil
}

// unquoteShellWord undoes shell quoting of one word: bare text, '...',
// "..." and $'...' (ANSI-C) pieces, concatenated.
func unquoteShellWord(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$'"):
			n, err := ansiC(s[i+2:], &b)
			if err != nil {
				return "", err
			}
			i += 2 + n
		case s[i] == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return "", fmt.Errorf("unterminated '...' in %q", s)
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 2
		case s[i] == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("\\\"$`", s[j+1]) >= 0 {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return "", fmt.Errorf(`unterminated "..." in %q`, s)
			}
			i = j + 1
		case s[i] == '\\' && i+1 < len(s):
			b.WriteByte(s[i+1])
			i += 2
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}

// ansiC decodes the body of a $'...' word up to its closing quote into b and
// returns how many bytes of s it used, the quote included.
func ansiC(s string, b *strings.Builder) (int, error) {
	simple := map[byte]byte{'a': '\a', 'b': '\b', 'e': 0x1b, 'E': 0x1b, 'f': '\f', 'n': '\n',
		'r': '\r', 't': '\t', 'v': '\v', '\\': '\\', '\'': '\'', '"': '"', '?': '?'}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\'' {
			return i + 1, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break
		}
		if r, ok := simple[s[i]]; ok {
			b.WriteByte(r)
			continue
		}
		switch {
		case s[i] == 'x':
			j := i + 1
			for j < len(s) && j < i+3 && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				return 0, fmt.Errorf(`bad \x escape in $'%s`, s)
			}
			v, _ := strconv.ParseUint(s[i+1:j], 16, 8)
			b.WriteByte(byte(v))
			i = j - 1
		case s[i] >= '0' && s[i] <= '7':
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i:j], 8, 8)
			b.WriteByte(byte(v))
			i = j - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return 0, fmt.Errorf("unterminated $'...' in %q", s)
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
