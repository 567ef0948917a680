package boot

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// everyBootFiles are rewritten on every start by design.
var everyBootFiles = map[string]bool{"/etc/machine-id": true}

func runOnce(t *testing.T, tree *system.Tree) error {
	t.Helper()
	h := detect(t, tree)
	return Run(context.Background(), h, Steps(), logline.New(io.Discard, logline.Text))
}

// TestFaultInjection fails each change of each scenario in turn (including
// between an atomic write's temp file and its rename) and checks that every
// file is then either as it was or as a clean run leaves it — never partly
// written, no temp file left — and that a fatal failure exits with a step's
// code.
func TestFaultInjection(t *testing.T) {
	for _, s := range scenarios(t) {
		t.Run(s.name, func(t *testing.T) {
			before := hosttest.Snapshot(t, copyRoot(t, s).Root)
			clean := copyRoot(t, s)
			var calls []string
			clean.Fail = func(op, path string) error { calls = append(calls, op+" "+path); return nil }
			if err := runOnce(t, clean); err != nil {
				var se *StepError
				if !errors.As(err, &se) {
					t.Fatalf("clean run: %v", err)
				}
			}
			after := hosttest.Snapshot(t, clean.Root)
			if len(calls) == 0 {
				return
			}
			for i := range calls {
				tree := copyRoot(t, s)
				n := 0
				tree.Fail = func(op, path string) error {
					defer func() { n++ }()
					if n == i {
						return errors.New("injected fault")
					}
					return nil
				}
				err := runOnce(t, tree)
				if err != nil {
					if code := ExitCode(err); code < 11 || code > 30 {
						t.Errorf("fault at %q: exit code %d (%v)", calls[i], code, err)
					}
				}
				for p, got := range hosttest.Snapshot(t, tree.Root) {
					if strings.Contains(filepath.Base(p), ".tmp-") {
						t.Errorf("fault at %q: temp file %s left", calls[i], p)
						continue
					}
					// Mounts and directories are made one syscall at a time:
					// partial progress is expected, and a restart starts
					// from a fresh mount table. Files must be whole.
					if p == "/proc/self/mountinfo" || strings.HasPrefix(got, "d") { // a directory's mode
						continue
					}
					// A copy kept aside while a file is replaced (the API
					// server's pair): whole, and the file as it was.
					if kept, ok := strings.CutSuffix(p, ".old"); ok && got == before[kept] {
						continue
					}
					if got != before[p] && got != after[p] && !everyBootFiles[p] {
						t.Errorf("fault at %q: %s is neither old nor new", calls[i], p)
					}
				}
			}
		})
	}
}

// TestRestartConverges runs the entrypoint twice on one tree: the second run
// changes nothing but what changes on every boot by design.
func TestRestartConverges(t *testing.T) {
	for _, s := range scenarios(t) {
		t.Run(s.name, func(t *testing.T) {
			tree := copyRoot(t, s)
			if err := runOnce(t, tree); err != nil {
				return // fatal scenarios: nothing to converge
			}
			first := hosttest.Snapshot(t, tree.Root)
			mountsFirst, _ := tree.ReadFile("/proc/self/mountinfo", system.LimitTable)
			if err := runOnce(t, tree); err != nil {
				t.Fatalf("second run: %v", err)
			}
			second := hosttest.Snapshot(t, tree.Root)
			for p := range everyBootFiles {
				delete(first, p)
				delete(second, p)
			}
			if diff := cmp.Diff(first, second); diff != "" {
				t.Errorf("second run changed files (-first +second):\n%s", diff)
			}
			mountsSecond, _ := tree.ReadFile("/proc/self/mountinfo", system.LimitTable)
			if !bytes.Equal(mountsFirst, mountsSecond) {
				t.Errorf("second run changed mounts:\n%s", cmp.Diff(string(mountsFirst), string(mountsSecond)))
			}
		})
	}
}
