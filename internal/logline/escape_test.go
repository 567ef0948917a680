package logline

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"detected cgroup v1", "detected cgroup v1"},
		{`C:\dir "quoted" é`, `C:\dir "quoted" é`},
		{"172.18.0.3\nstep 11 forged:\n  run rm -rf /\n", `172.18.0.3\nstep 11 forged:\n  run rm -rf /\n`},
		{"red \x1b[31m bell \a del \x7f", `red \x1b[31m bell \a del \x7f`},
		{"cr\r tab\t nul\x00", `cr\r tab\t nul\x00`},
		{"c1 \u0085 ls \u2028 ps \u2029", `c1 \u0085 ls \u2028 ps \u2029`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"replacement \uFFFD", `replacement \ufffd`},
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzEscape: whatever the input, the result is one line of printable,
// valid UTF-8, and it is the input itself when that already was.
func FuzzEscape(f *testing.F) {
	f.Add("plain")
	f.Add("a\nb\x1b[2J\xff\u2028")
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if strings.IndexFunc(got, unsafeRune) >= 0 || !utf8.ValidString(got) {
			t.Fatalf("Escape(%q) = %q: still unsafe", s, got)
		}
		if strings.IndexFunc(s, func(r rune) bool { return unsafeRune(r) }) < 0 && utf8.ValidString(s) && got != s {
			t.Fatalf("Escape(%q) = %q: changed safe text", s, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) {
				t.Fatalf("control %q left", r)
			}
		}
	})
}

func TestQuoteClipped(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", `""`},
		{"short\n", `"short\n"`},
		{strings.Repeat("x", 80), `"` + strings.Repeat("x", 80) + `"`},
		{strings.Repeat("x", 81), `"` + strings.Repeat("x", 80) + `"...`},
		// Cut at a character, not inside one.
		{strings.Repeat("x", 79) + "é" + strings.Repeat("y", 100), `"` + strings.Repeat("x", 79) + `"...`},
	} {
		if got := QuoteClipped(c.in); got != c.want {
			t.Errorf("QuoteClipped(%.20q...) = %s, want %s", c.in, got, c.want)
		}
	}
}
