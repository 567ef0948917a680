package logline

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes text from the host safe inside one line of output: a plan
// line, a log line, an error, a row of check. Every control character
// (C0, DEL, C1), Unicode line and paragraph separator, and byte of invalid
// UTF-8 is written as its Go escape (\n, \x1b, \u2028, \xff); all else,
// backslashes included, is kept. So no input can start a line of its own
// or send a terminal an escape sequence, and ordinary text prints as it
// is. Every value from a host reaches the output through it: the output
// writers (Logger, plan rendering, check's rows) call it on each line.
func Escape(s string) string {
	// Printable ASCII, which is all of nearly every value, a byte at a
	// time: decoding each rune of a plan's 4 KiB paths was a quarter of
	// a capture's CPU.
	i := 0
	for i < len(s) && ' ' <= s[i] && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	j := strings.IndexFunc(s[i:], unsafeRune)
	if j < 0 {
		return s
	}
	i += j
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r) // 'x' with the escape inside
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// unsafeRune: a rune Escape writes escaped. utf8.RuneError stands for
// invalid UTF-8 (and the replacement character itself, escaped too).
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == utf8.RuneError
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&15]})
}

// maxQuoted is how much of a value QuoteClipped quotes.
const maxQuoted = 80

// QuoteClipped quotes a value from the host for an error or a log line
// (strconv.Quote), at most its first 80 bytes, cut at a character, with
// "..." after the quote when it leaves the rest out: a field of a file may
// be a megabyte long, the line that names it must not be.
func QuoteClipped(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > maxQuoted-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}
