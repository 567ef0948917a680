package proxy

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// FuzzProxyRender: whatever the proxy values, the drop-in either is refused
// (a control character, invalid UTF-8 or a noncharacter in a value) or reads back, through
// systemd's quoting rules, as exactly the values given, on one line.
func FuzzProxyRender(f *testing.F) {
	for _, tt := range renderTests {
		v := map[string]string{}
		for _, kv := range tt.vars {
			v[kv.Name] = kv.Value
		}
		f.Add(v["HTTP_PROXY"], v["HTTPS_PROXY"], v["NO_PROXY"])
	}
	f.Fuzz(func(t *testing.T, httpProxy, httpsProxy, noProxy string) {
		vars := []Var{
			{"HTTP_PROXY", httpProxy}, {"HTTPS_PROXY", httpsProxy}, {"NO_PROXY", noProxy},
			{"http_proxy", httpProxy}, {"no_proxy", noProxy},
		}
		out, err := Render(vars)
		// What systemd cannot carry, or the entrypoint refuses: a control
		// character (C0, DEL, C1), invalid UTF-8, and the noncharacters
		// systemd's UTF-8 check refuses.
		refused := false
		for _, v := range vars {
			refused = refused || !utf8.ValidString(v.Value) || strings.IndexFunc(v.Value, func(r rune) bool {
				return unicode.IsControl(r) || r >= 0xFDD0 && r <= 0xFDEF || r%0x10000 >= 0xFFFE
			}) >= 0
		}
		if err != nil {
			if refused {
				return
			}
			t.Fatalf("Render(%q) refused values systemd can carry: %v", vars, err)
		}
		if refused {
			t.Fatalf("Render(%q) = %q: wrote what systemd cannot carry", vars, out)
		}
		if n := strings.Count(string(out), "\n"); n != 2 {
			t.Fatalf("Render(%q) = %q: %d lines, want 2", vars, out, n)
		}
		back, err := parseDropIn(string(out))
		if err != nil {
			t.Fatalf("Render(%q) = %q, which systemd would not read: %v", vars, out, err)
		}
		if diff := cmp.Diff(vars, back); diff != "" {
			t.Fatalf("Render(%q) = %q reads back differently (-given +read):\n%s", vars, out, diff)
		}
	})
}
