package e2e

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseShowEnvironment(t *testing.T) {
	// The FOO line is what systemd 252 printed for
	// `systemctl set-environment 'FOO=a b"c\d%e$f'"'"'g'`.
	in := "LANG=C.UTF-8\n" +
		"EMPTY=\n" +
		`FOO=$'a b"c\\d%e$f\'g'` + "\n" +
		`CTL=$'tab\there\nnl\x01'` + "\n" +
		`SQ='it is'` + "\n" +
		`DQ="say \"hi\" \\ \$HOME"` + "\n"
	got, err := parseShowEnvironment(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"LANG":  "C.UTF-8",
		"EMPTY": "",
		"FOO":   `a b"c\d%e$f'g`,
		"CTL":   "tab\there\nnl\x01",
		"SQ":    "it is",
		"DQ":    `say "hi" \ $HOME`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseShowEnvironment (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"NOEQUALS", "=x", "A=$'open", "A='open", `A="open`} {
		if _, err := parseShowEnvironment(bad); err == nil {
			t.Errorf("parseShowEnvironment(%q): no error", bad)
		}
	}
}
