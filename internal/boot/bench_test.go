package boot

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// BenchmarkDetectPlan measures detecting and planning every step of each
// fake host: the work the entrypoint does before it changes anything.
func BenchmarkDetectPlan(b *testing.B) {
	entries, err := os.ReadDir(hostsDir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		b.Run(e.Name(), func(b *testing.B) {
			tree := system.NewTree(filepath.Join(hostsDir, e.Name(), "root"))
			tree.Exec = fakeCommands(tree)
			env, _ := tree.Environ()
			ctx := context.Background()
			steps := Steps()
			b.ReportAllocs()
			for b.Loop() {
				h, err := Detect(tree, env)
				if err != nil {
					b.Fatal(err)
				}
				h.Rand, h.ProbeTimeout = fixedRand(), testProbeTimeout
				DryRun(ctx, h, steps)
			}
		})
	}
}
