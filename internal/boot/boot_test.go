package boot

import (
	"strings"
	"testing"
)

func TestFactValue(t *testing.T) {
	for in, want := range map[string]string{
		"overlayfs":              "overlayfs",
		"native\nstep 3 x:":      `native\nstep 3 x:`,
		"tab\there":              `tab\there`,
		strings.Repeat("a", 400): strings.Repeat("a", 300) + "… (clipped)",
	} {
		if got := factValue(in); got != want {
			t.Errorf("factValue(%.20q) = %.40q, want %.40q", in, got, want)
		}
	}
}
