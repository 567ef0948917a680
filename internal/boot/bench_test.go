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
// Hosts with a probe that hangs until its timeout are measured apart, by
// BenchmarkDetectPlanProbeTimeout: their time is the timeout's.
func BenchmarkDetectPlan(b *testing.B) {
	for _, name := range benchScenarios(b, false) {
		b.Run(name, func(b *testing.B) { benchDetectPlan(b, name) })
	}
}

// BenchmarkDetectPlanProbeTimeout is BenchmarkDetectPlan for the hosts whose
// probe hangs (root/.host/run/NAME.hang): each run waits for the probe
// timeout of the tests (testProbeTimeout; 5 s in production).
func BenchmarkDetectPlanProbeTimeout(b *testing.B) {
	for _, name := range benchScenarios(b, true) {
		b.Run(name, func(b *testing.B) { benchDetectPlan(b, name) })
	}
}

// BenchmarkReadMountinfo measures one read and parse of each fake host's
// /proc/self/mountinfo (moby/sys/mountinfo, which DESIGN.md prescribes):
// the unit cost behind every step that reads the mount table.
func BenchmarkReadMountinfo(b *testing.B) {
	for _, name := range benchScenarios(b, false) {
		b.Run(name, func(b *testing.B) {
			tree := system.NewTree(filepath.Join(hostsDir, name, "root"))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := system.ReadMountinfo(tree); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchDetectPlan(b *testing.B, name string) {
	tree := system.NewTree(filepath.Join(hostsDir, name, "root"))
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
}

// benchScenarios lists the fake hosts, those with a hanging probe or the
// others.
func benchScenarios(b *testing.B, hanging bool) []string {
	entries, err := os.ReadDir(hostsDir)
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		hangs, _ := filepath.Glob(filepath.Join(hostsDir, e.Name(), "root", system.ProbeDir, "run", "*.hang"))
		if (len(hangs) > 0) == hanging {
			out = append(out, e.Name())
		}
	}
	return out
}
