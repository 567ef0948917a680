package proxy

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// DropIn is the file systemd reads at start; see systemd-system.conf(5).
const DropIn = "/etc/systemd/system.conf.d/proxy-default-environment.conf"

// upper are always written, empty when unset, as the reference does;
// lower are written only when set, since many tools read only those.
var (
	upper = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}
	lower = []string{"http_proxy", "https_proxy", "no_proxy"}
)

// Var is one environment variable for the drop-in.
type Var struct{ Name, Value string }

// Facts is what configure_proxy needs.
type Facts struct {
	Vars []Var
	// Current is the drop-in's content now; nil when it does not exist.
	Current   []byte
	DirExists bool
}

// Detect reads the proxy variables and the current drop-in.
func Detect(sys system.System, lookupEnv func(string) (string, bool)) (Facts, error) {
	f := Facts{Vars: make([]Var, 0, len(upper)+len(lower))}
	for _, k := range upper {
		v, _ := lookupEnv(k)
		f.Vars = append(f.Vars, Var{k, v})
	}
	for _, k := range lower {
		if v, ok := lookupEnv(k); ok {
			f.Vars = append(f.Vars, Var{k, v})
		}
	}
	var err error
	if f.Current, err = system.ReadOptional(sys, DropIn, system.LimitConfig); err != nil {
		return Facts{}, err
	}
	if fi, err := sys.Stat(path.Dir(DropIn)); err == nil && fi.IsDir() {
		f.DirExists = true
	}
	return f, nil
}

// Plan writes the drop-in unless it already says the same.
func Plan(f Facts) ([]plan.Action, error) {
	content, err := Render(f.Vars)
	if err != nil {
		return nil, err
	}
	if f.Current != nil && bytes.Equal(f.Current, content) {
		return nil, nil
	}
	var actions []plan.Action
	if !f.DirExists {
		actions = append(actions, plan.Mkdir(path.Dir(DropIn), 0o755))
	}
	w := plan.WriteFile(DropIn, content, 0o644).Because("every unit gets the proxy settings")
	// A value may hold a proxy's user and password (a URL's userinfo ends
	// at an "@"): the drop-in is then never shown.
	if slices.ContainsFunc(f.Vars, func(v Var) bool { return strings.Contains(v.Value, "@") }) {
		w = w.Secret()
	}
	return append(actions, w), nil
}

// Render writes the drop-in's content. Each assignment is double-quoted;
// systemd unescapes \" and \\ inside double quotes and expands % specifiers
// (measured on systemd 252), so those are escaped. A newline or another
// control character cannot be carried through and is refused.
func Render(vars []Var) ([]byte, error) {
	words := make([]string, len(vars))
	for i, v := range vars {
		if err := check(v); err != nil {
			return nil, err
		}
		words[i] = Quote(v.Name + "=" + v.Value)
	}
	return []byte("[Manager]\nDefaultEnvironment=" + strings.Join(words, " ") + "\n"), nil
}

func check(v Var) error {
	if i := strings.IndexFunc(v.Value, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return fmt.Errorf("%s: control character %q at byte %d cannot be passed to systemd", v.Name, v.Value[i], i)
	}
	// systemd ignores an assignment whose value is not UTF-8
	// (env_value_is_valid), so the variable would silently be missing.
	if !utf8.ValidString(v.Value) {
		return fmt.Errorf("%s: value is not valid UTF-8 and cannot be passed to systemd", v.Name)
	}
	for i, r := range v.Value {
		switch {
		case unicode.IsControl(r):
			// C1 (U+0080-U+009F): C0 and DEL were refused above.
			return fmt.Errorf("%s: control character %U at byte %d cannot be passed to systemd", v.Name, r, i)
		case isNoncharacter(r):
			return fmt.Errorf("%s: %U at byte %d is a Unicode noncharacter, which systemd refuses: the variable would be missing", v.Name, r, i)
		}
	}
	return nil
}

// isNoncharacter reports whether r is one of the code points systemd's
// utf8_is_valid (unichar_is_valid) refuses in valid UTF-8: U+FDD0-U+FDEF
// and the last two of every plane. Go's utf8.ValidString accepts them.
func isNoncharacter(r rune) bool {
	return r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE
}

// Values returns the values a drop-in's DefaultEnvironment= lines assign,
// unquoted as systemd reads them: the inverse of Render (capture redacts
// the proxy passwords a drop-in of an earlier boot holds, whatever the
// environment says now). Text Render would not write is read as best it
// can be.
func Values(dropIn []byte) []string {
	var out []string
	for line := range strings.Lines(string(dropIn)) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "DefaultEnvironment=")
		if !ok {
			continue
		}
		for _, word := range unquoteWords(rest) {
			if _, v, ok := strings.Cut(word, "="); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// unquoteWords splits a DefaultEnvironment= value into its words, undoing
// what Quote does: double quotes group, a backslash takes the next
// byte as it is, "%%" is one '%'.
func unquoteWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == '"':
			quoted, inWord = !quoted, true
		case c == '%' && i+1 < len(s) && s[i+1] == '%':
			i++
			w.WriteByte('%')
			inWord = true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// Quote quotes one word for a systemd DefaultEnvironment= line. It works on
// bytes: every byte but '"', '\\' and '%' is written as it is.
func Quote(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '%':
			b = append(b, "%%"...)
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
