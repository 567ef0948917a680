package plan

import (
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// BenchmarkPreflightDeep preflights mkdirs of every level of a path 4000
// directories deep (marking each mkdir's ancestors cleaned each
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
