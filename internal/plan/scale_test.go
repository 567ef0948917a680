package plan

import (
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// BenchmarkPreflightDeep preflights mkdirs of every level of a path 4000
// directories deep (issue 24: marking each mkdir's ancestors cleaned each
// of them again, quadratic in the depth).
func BenchmarkPreflightDeep(b *testing.B) {
	var actions []Action
	p := ""
	for range 4000 {
		p += "/d"
		actions = append(actions, Mkdir(p, 0o755))
	}
	sys := system.NewTree(b.TempDir())
	for b.Loop() {
		if err := Preflight(sys, actions); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParentOf: parentOf is path.Dir of a clean path.
func TestParentOf(t *testing.T) {
	for p, want := range map[string]string{"/": "/", "/a": "/", "/a/b": "/a", "a": ".", "a/b": "a", strings.Repeat("/x", 3): "/x/x"} {
		if got := parentOf(p); got != want {
			t.Errorf("parentOf(%q) = %q, want %q", p, got, want)
		}
	}
}
