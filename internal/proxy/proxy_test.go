package proxy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// parseDropIn reads a drop-in the way systemd 252 reads DefaultEnvironment=
// in system.conf.d: the words of the value are split on blanks, each
// unquoted with C escapes (extract_first_word with EXTRACT_UNQUOTE |
// EXTRACT_CUNESCAPE: inside double quotes a backslash escapes the next
// character, \" and \\ among them), then its % specifiers expanded (%% is a
// literal %; this parser refuses any other specifier, as Render must never
// produce one), then split at the first "=". The value may contain no
// control characters and must be UTF-8 (env_value_is_valid).
func parseDropIn(content string) ([]Var, error) {
	const head = "[Manager]\nDefaultEnvironment="
	rest, ok := strings.CutPrefix(content, head)
	if !ok {
		return nil, fmt.Errorf("no %q", head)
	}
	line, tail, ok := strings.Cut(rest, "\n")
	if !ok || tail != "" {
		return nil, errors.New("want exactly one line after the section header, newline-terminated")
	}
	var vars []Var
	for {
		word, remaining, err := extractWord(line)
		if err != nil {
			return nil, err
		}
		if word == nil {
			return vars, nil
		}
		line = remaining
		expanded, err := expandSpecifiers(*word)
		if err != nil {
			return nil, err
		}
		name, value, ok := strings.Cut(expanded, "=")
		if !ok {
			return nil, fmt.Errorf("word %q is no assignment", expanded)
		}
		vars = append(vars, Var{name, value})
	}
}

// extractWord takes the first word off s: nil when only blanks remain.
func extractWord(s string) (*string, string, error) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i == len(s) {
		return nil, "", nil
	}
	var b strings.Builder
	quote := byte(0)
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == 0 && (c == ' ' || c == '\t'):
			w := b.String()
			return &w, s[i:], nil
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote != 0 && c == quote:
			quote = 0
		case c == '\\':
			i++
			if i == len(s) {
				return nil, "", errors.New("backslash at end of line")
			}
			r, n, err := unescape(s[i:])
			if err != nil {
				return nil, "", err
			}
			b.WriteString(r)
			i += n - 1
		default:
			b.WriteByte(c)
		}
	}
	if quote != 0 {
		return nil, "", fmt.Errorf("unterminated %c quote", quote)
	}
	w := b.String()
	return &w, "", nil
}

// unescape decodes the C escape at the start of s (after the backslash).
func unescape(s string) (string, int, error) {
	switch s[0] {
	case '"', '\\', '\'':
		return s[:1], 1, nil
	case 'n':
		return "\n", 1, nil
	case 't':
		return "\t", 1, nil
	case 'r':
		return "\r", 1, nil
	case 's':
		return " ", 1, nil
	case 'x':
		if len(s) < 3 {
			return "", 0, errors.New("short \\x escape")
		}
		v, err := strconv.ParseUint(s[1:3], 16, 8)
		if err != nil {
			return "", 0, err
		}
		return string([]byte{byte(v)}), 3, nil
	}
	return "", 0, fmt.Errorf("escape \\%c: this parser does not know it, and Render should not write it", s[0])
}

func expandSpecifiers(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", errors.New("lone % at end of word")
		}
		i++
		if s[i] != '%' {
			return "", fmt.Errorf("specifier %%%c would be expanded by systemd", s[i])
		}
		b.WriteByte('%')
	}
	return b.String(), nil
}

const (
	noProxy = "172.18.0.0/16,fc00:f853:ccd:e793::/64,localhost,127.0.0.1,10.96.0.0/16,10.244.0.0/16,kind-control-plane,.svc,.svc.cluster,.svc.cluster.local"
	empty   = "[Manager]\nDefaultEnvironment=\"HTTP_PROXY=\" \"HTTPS_PROXY=\" \"NO_PROXY=\"\n"
)

var renderTests = []struct {
	name    string
	vars    []Var
	want    string
	wantErr string
}{
	{
		name: "unset: empty values, as the reference",
		vars: []Var{{"HTTP_PROXY", ""}, {"HTTPS_PROXY", ""}, {"NO_PROXY", ""}},
		want: empty,
	},
	{
		name: "kind's proxy environment, lower-case forms set",
		vars: []Var{
			{"HTTP_PROXY", "http://proxy.example.com:3128"}, {"HTTPS_PROXY", "http://proxy.example.com:3128"}, {"NO_PROXY", noProxy},
			{"http_proxy", "http://proxy.example.com:3128"}, {"https_proxy", "http://proxy.example.com:3128"}, {"no_proxy", noProxy},
		},
		want: "[Manager]\nDefaultEnvironment=" +
			`"HTTP_PROXY=http://proxy.example.com:3128" "HTTPS_PROXY=http://proxy.example.com:3128" "NO_PROXY=` + noProxy + `" ` +
			`"http_proxy=http://proxy.example.com:3128" "https_proxy=http://proxy.example.com:3128" "no_proxy=` + noProxy + "\"\n",
	},
	{
		name:    "tab refused",
		vars:    []Var{{"NO_PROXY", "a b\tc"}},
		wantErr: `NO_PROXY: control character '\t' at byte 3 cannot be passed to systemd`,
	},
	{
		name: "space",
		vars: []Var{{"NO_PROXY", "a b  c "}},
		want: "[Manager]\nDefaultEnvironment=\"NO_PROXY=a b  c \"\n",
	},
	{
		name: "double quotes escaped",
		vars: []Var{{"HTTP_PROXY", `http://u:"pw"@p:1`}},
		want: "[Manager]\nDefaultEnvironment=\"HTTP_PROXY=http://u:\\\"pw\\\"@p:1\"\n",
	},
	{
		name: "single quotes literal",
		vars: []Var{{"HTTP_PROXY", `it's`}},
		want: "[Manager]\nDefaultEnvironment=\"HTTP_PROXY=it's\"\n",
	},
	{
		name: "backslashes escaped, also before n and x",
		vars: []Var{{"HTTP_PROXY", `http://CORP\svc:p\nw\x41@p:1\`}},
		want: "[Manager]\nDefaultEnvironment=\"HTTP_PROXY=http://CORP\\\\svc:p\\\\nw\\\\x41@p:1\\\\\"\n",
	},
	{
		name: "percent doubled (specifier), percent-encoding kept",
		vars: []Var{{"HTTPS_PROXY", "http://u:p%40ss%H@p:1"}},
		want: "[Manager]\nDefaultEnvironment=\"HTTPS_PROXY=http://u:p%%40ss%%H@p:1\"\n",
	},
	{
		name: "dollar literal",
		vars: []Var{{"HTTP_PROXY", "http://u:pa$$w0rd${X}@p:1"}},
		want: "[Manager]\nDefaultEnvironment=\"HTTP_PROXY=http://u:pa$$w0rd${X}@p:1\"\n",
	},
	{
		name: "UTF-8 kept byte for byte",
		vars: []Var{{"NO_PROXY", "bücher.example,例え.jp"}},
		want: "[Manager]\nDefaultEnvironment=\"NO_PROXY=bücher.example,例え.jp\"\n",
	},
	{
		name:    "newline refused",
		vars:    []Var{{"HTTP_PROXY", "http://p:1\n[Service]"}},
		wantErr: `HTTP_PROXY: control character '\n' at byte 10 cannot be passed to systemd`,
	},
	{
		name:    "carriage return refused",
		vars:    []Var{{"HTTP_PROXY", ""}, {"NO_PROXY", "a\r"}},
		wantErr: `NO_PROXY: control character '\r' at byte 1 cannot be passed to systemd`,
	},
	{
		name:    "NUL refused",
		vars:    []Var{{"HTTP_PROXY", "a\x00b"}},
		wantErr: `HTTP_PROXY: control character '\x00' at byte 1 cannot be passed to systemd`,
	},
	{
		name:    "DEL refused",
		vars:    []Var{{"HTTP_PROXY", "a\x7f"}},
		wantErr: `HTTP_PROXY: control character '\x7f' at byte 1 cannot be passed to systemd`,
	},
	{
		name:    "invalid UTF-8 refused (systemd would drop the assignment)",
		vars:    []Var{{"HTTP_PROXY", "http://p\xff:1"}},
		wantErr: "HTTP_PROXY: value is not valid UTF-8 and cannot be passed to systemd",
	},
	// Beyond ASCII: a C1 control character (refused like C0), and the noncharacters
	// systemd's utf8_is_valid refuses, so that env_value_is_valid drops
	// the assignment, as for invalid UTF-8.
	{name: "C1 control refused", vars: []Var{{"NO_PROXY", "a\u0085b"}}, wantErr: `NO_PROXY: control character U+0085 at byte 1 cannot be passed to systemd`},
	{name: "U+FFFE refused", vars: []Var{{"HTTP_PROXY", "http://p\ufffe:1"}}, wantErr: "HTTP_PROXY: U+FFFE at byte 8 is a Unicode noncharacter, which systemd refuses: the variable would be missing"},
	{name: "U+FDD0 refused", vars: []Var{{"https_proxy", "\ufdd0"}}, wantErr: "https_proxy: U+FDD0 at byte 0 is a Unicode noncharacter, which systemd refuses: the variable would be missing"},
	{name: "U+10FFFF refused", vars: []Var{{"HTTP_PROXY", "x\U0010FFFF"}}, wantErr: "HTTP_PROXY: U+10FFFF at byte 1 is a Unicode noncharacter, which systemd refuses: the variable would be missing"},
	{
		name: "characters next to the noncharacters kept",
		vars: []Var{{"HTTP_PROXY", "\ufdcf\ufdf0\ufffd\U0001fffd\u00a0\u2028"}},
		want: "[Manager]\nDefaultEnvironment=\"HTTP_PROXY=\ufdcf\ufdf0\ufffd\U0001fffd\u00a0\u2028\"\n",
	},
}

func TestRender(t *testing.T) {
	for _, tt := range renderTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.vars)
			if hosttest.ErrString(err) != tt.wantErr {
				t.Fatalf("Render error = %q, want %q", hosttest.ErrString(err), tt.wantErr)
			}
			if err != nil {
				if got != nil {
					t.Errorf("Render returned %q with its error", got)
				}
				return
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Render (-want +got):\n%s", diff)
			}
			back, err := parseDropIn(string(got))
			if err != nil {
				t.Fatalf("systemd would not read %q: %v", got, err)
			}
			if diff := cmp.Diff(tt.vars, back); diff != "" {
				t.Errorf("round trip through systemd's quoting (-rendered +read back):\n%s", diff)
			}
			var values []string
			for _, v := range tt.vars {
				values = append(values, v.Value)
			}
			if diff := cmp.Diff(values, Values(got)); diff != "" {
				t.Errorf("Values (-rendered +read back):\n%s", diff)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"HTTP_PROXY=", `"HTTP_PROXY="`},
		{`a"b`, `"a\"b"`},
		{`a\b`, `"a\\b"`},
		{`\"`, `"\\\""`},
		{"%", `"%%"`},
		{"%%n", `"%%%%n"`},
		{"$HOME ${x}", `"$HOME ${x}"`},
		{"'", `"'"`},
		// Bytes, not runes: no U+FFFD replacement.
		{"\xff", "\"\xff\""},
	}
	for _, tt := range tests {
		if got := Quote(tt.in); got != tt.want {
			t.Errorf("Quote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseDropInRejects(t *testing.T) {
	// The test parser is strict where systemd differs from plain text.
	for _, in := range []string{
		"[Manager]\nDefaultEnvironment=\"A=%H\"\n",
		"[Manager]\nDefaultEnvironment=\"A=\\q\"\n",
		"[Manager]\nDefaultEnvironment=\"A=b\n",
		"[Manager]\nDefaultEnvironment=\"A=b\"",
		"[Manager]\nDefaultEnvironment=noequals\n",
	} {
		if vars, err := parseDropIn(in); err == nil {
			t.Errorf("parseDropIn(%q) = %q, want an error", in, vars)
		}
	}
	// Unquoted and mixed words parse as systemd reads them.
	got, err := parseDropIn("[Manager]\nDefaultEnvironment=A=1  \"B=2 3\" C='4 5'\\x41 D=%%\n")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Var{{"A", "1"}, {"B", "2 3"}, {"C", "4 5A"}, {"D", "%"}}, got); diff != "" {
		t.Errorf("parseDropIn (-want +got):\n%s", diff)
	}
}

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name  string
		env   func(string) (string, bool)
		files map[string]string
		want  Facts
	}{
		{
			name: "nothing set, no drop-in, no directory",
			env:  env(),
			want: Facts{Vars: []Var{{"HTTP_PROXY", ""}, {"HTTPS_PROXY", ""}, {"NO_PROXY", ""}}},
		},
		{
			name: "lower-case forms only when set, even empty",
			env:  env("HTTPS_PROXY", "http://p:1", "https_proxy", "http://p:1", "no_proxy", ""),
			files: map[string]string{
				"etc/systemd/system.conf.d/": "",
			},
			want: Facts{
				Vars:      []Var{{"HTTP_PROXY", ""}, {"HTTPS_PROXY", "http://p:1"}, {"NO_PROXY", ""}, {"https_proxy", "http://p:1"}, {"no_proxy", ""}},
				DirExists: true,
			},
		},
		{
			name:  "drop-in already there",
			env:   env(),
			files: map[string]string{DropIn[1:]: empty},
			want: Facts{
				Vars:    []Var{{"HTTP_PROXY", ""}, {"HTTPS_PROXY", ""}, {"NO_PROXY", ""}},
				Current: []byte(empty), DirExists: true,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(hosttest.Tree(t, tt.files), tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Detect (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	unset := []Var{{"HTTP_PROXY", ""}, {"HTTPS_PROXY", ""}, {"NO_PROXY", ""}}
	write := plan.WriteFile(DropIn, []byte(empty), 0o644).Because("every unit gets the proxy settings")
	tests := []struct {
		name    string
		f       Facts
		want    []plan.Action
		wantErr string
	}{
		{"fresh image: directory and file", Facts{Vars: unset}, []plan.Action{plan.Mkdir("/etc/systemd/system.conf.d", 0o755), write}, ""},
		{"directory there", Facts{Vars: unset, DirExists: true}, []plan.Action{write}, ""},
		{"same content: nothing", Facts{Vars: unset, Current: []byte(empty), DirExists: true}, nil, ""},
		{"other content: rewritten", Facts{Vars: unset, Current: []byte("[Manager]\n"), DirExists: true}, []plan.Action{write}, ""},
		{"empty file: rewritten", Facts{Vars: unset, Current: []byte{}, DirExists: true}, []plan.Action{write}, ""},
		{
			"bad value: nothing written",
			Facts{Vars: []Var{{"HTTP_PROXY", "a\nb"}}, DirExists: true}, nil,
			`HTTP_PROXY: control character '\n' at byte 1 cannot be passed to systemd`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.f)
			hosttest.Result(t, "Plan", got, err, tt.want, tt.wantErr)
		})
	}
}

// TestPlanHidesCredentials: a drop-in holding a proxy's password is shown
// by its size only, in text and JSON, however short; one without is shown.
func TestPlanHidesCredentials(t *testing.T) {
	const password = "SECRET-MARKER-7f3a"
	for _, tc := range []struct {
		value string
		shown bool
	}{
		{"http://proxy.corp:3128", true},
		{"http://user:" + password + "@proxy.corp:3128", false},
		{"http://" + password + "@p:1", false},
	} {
		actions, err := Plan(Facts{Vars: []Var{{"HTTP_PROXY", tc.value}}, DirExists: true})
		if err != nil || len(actions) != 1 {
			t.Fatalf("%q: %v, %v", tc.value, actions, err)
		}
		text := actions[0].String()
		j, err := actions[0].MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(text, tc.value) && strings.Contains(string(j), tc.value); got != tc.shown {
			t.Errorf("%q: shown %v, want %v:\n%s\n%s", tc.value, got, tc.shown, text, j)
		}
		if strings.Contains(text+string(j), password) {
			t.Errorf("%q: the password is shown:\n%s\n%s", tc.value, text, j)
		}
	}
}
