package system

import (
	"path"
	"strings"
	"testing"
)

// TestCleanAbs: cleanAbs says what path.Clean would, for every path of up
// to 7 bytes of '/', '.' and 'a'.
func TestCleanAbs(t *testing.T) {
	var paths func(prefix string, n int)
	paths = func(p string, n int) {
		if want := strings.HasPrefix(p, "/") && path.Clean(p) == p; cleanAbs(p) != want {
			t.Errorf("cleanAbs(%q) = %t, path.Clean says %t", p, !want, want)
		}
		if n > 0 {
			for _, c := range []string{"/", ".", "a"} {
				paths(p+c, n-1)
			}
		}
	}
	paths("", 7)
}
