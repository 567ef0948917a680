package boot

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

var hostsDir = hosttest.HostsDir()

// scenario is one fake host under testdata/hosts/NAME:
//
//	README         one line: where the files come from
//	root/          the host's files (proc/, sys/, etc/, kind/, usr/ ...),
//	               root/.host/ the probe answers (see system.Tree)
//	plan.golden    what --dry-run prints for it
//	changes.golden what applying the plan changes, one line each
type scenario struct {
	name, dir string
}

func scenarios(t *testing.T) []scenario {
	t.Helper()
	var out []scenario
	for _, name := range hosttest.Hosts(t) {
		out = append(out, scenario{name, filepath.Join(hostsDir, name)})
	}
	if len(out) == 0 {
		t.Fatal("no scenarios in " + hostsDir)
	}
	return out
}

// copyRoot copies a scenario's root to a temp dir as a fresh clone holds
// it, with root/.host/modes applied (see hosttest.CopyScenario).
func copyRoot(t *testing.T, s scenario) *system.Tree {
	t.Helper()
	dst := fastTempDir(t)
	if err := hosttest.CopyScenario(filepath.Join(s.dir, "root"), dst); err != nil {
		t.Fatal(err)
	}
	tree := system.NewTree(dst)
	tree.Exec = fakeCommands(tree)
	return tree
}

// fastTempDir is a temp dir in memory: the fault injection tests copy
// every tree hundreds of times, and our CI disk is slow at metadata (10x
// measured). The sandbox (sandbox_test.go) keeps TMPDIR on a tmpfs.
func fastTempDir(t *testing.T) string { return t.TempDir() }

func detect(t *testing.T, tree *system.Tree) *Host {
	t.Helper()
	env, _ := tree.Environ()
	h, err := Detect(tree, env)
	if err != nil {
		t.Fatalf("detect: %v", err)
	}
	h.Rand, h.ProbeTimeout = fixedRand(), testProbeTimeout
	return h
}

// TestHosts plans every fake host and compares the plan with its golden
// file; then applies the plan to a copy of the host through the recording
// Tree, compares the changes, and plans again: a fixed host needs nothing.
func TestHosts(t *testing.T) {
	for _, s := range scenarios(t) {
		t.Run(s.name, func(t *testing.T) {
			if b, err := os.ReadFile(filepath.Join(s.dir, "README")); err != nil || len(bytes.TrimSpace(b)) == 0 {
				t.Errorf("scenario needs a README naming where its files come from")
			}
			ctx := context.Background()
			tree := copyRoot(t, s)
			h := detect(t, tree)
			results, planErr := DryRun(ctx, h, Steps())
			var out bytes.Buffer
			if err := Render(&out, h, results); err != nil {
				t.Fatal(err)
			}
			// Under an emulator the plan of a host whose probe hangs names
			// the stretched limit; its golden names the native one.
			got := bytes.ReplaceAll(out.Bytes(), []byte("timed out after "+testProbeTimeout.String()),
				[]byte("timed out after "+nativeProbeTimeout.String()))
			hosttest.Golden(t, filepath.Join(s.dir, "plan.golden"), got)
			if len(tree.Changes()) != 0 {
				t.Fatalf("a dry run changed the tree: %q", tree.Changes())
			}

			var logs bytes.Buffer
			h.Rand = fixedRand() // the same identities as the dry run showed
			probed := len(tree.Ran())
			err := Run(ctx, h, Steps(), logline.New(&logs, logline.Text))
			if (err == nil) != (planErr == nil) {
				t.Fatalf("run: %v, but dry run: %v", err, planErr)
			}
			var changes bytes.Buffer
			for _, c := range tree.Changes() {
				changes.WriteString(c + "\n")
			}
			changes.WriteString("--- log\n")
			changes.Write(logs.Bytes())
			// The commands the run started (probes run concurrently:
			// sorted, the list is stable), less any started ahead of a
			// step that a failed step before it never reached: whether
			// that one had started yet is a matter of timing.
			var ran []string
			for _, argv := range tree.Ran()[probed:] {
				ran = append(ran, strings.Join(argv, " "))
			}
			if h.ahead != nil {
				if u := h.ahead.Unclaimed(); err == nil && len(u) > 0 {
					t.Errorf("started ahead, but no step ran it: %q", u)
				}
				for _, argv := range h.ahead.Unclaimed() {
					if i := slices.Index(ran, strings.Join(argv, " ")); i >= 0 {
						ran = slices.Delete(ran, i, i+1)
					}
				}
			}
			// nft lists the ruleset once the saves are in and hold
			// none of Docker's rules: a step that fails before
			// select_iptables may end the run before it starts.
			var se *StepError
			if errors.As(err, &se) && se.Code < stepCode(t, "select_iptables") {
				ran = slices.DeleteFunc(ran, func(c string) bool { return c == strings.Join(network.NftListArgv, " ") })
			}
			if len(ran) > 0 {
				slices.Sort(ran)
				changes.WriteString("--- commands\n" + strings.Join(ran, "\n") + "\n")
			}
			hosttest.Golden(t, filepath.Join(s.dir, "changes.golden"), changes.Bytes())
			if err != nil {
				return
			}

			again, err := DryRun(ctx, detect(t, tree), Steps())
			if err != nil {
				t.Fatalf("planning again: %v", err)
			}
			for _, r := range again {
				if !plan.Converged(r.Actions) {
					t.Errorf("step %s still plans changes after applying:\n%s", r.Step, plan.Changes(r.Actions))
				}
			}
		})
	}
}

// stepCode is the exit code of the step named name.
func stepCode(t *testing.T, name string) int {
	t.Helper()
	for _, s := range Steps() {
		if s.Name == name {
			return s.Code
		}
	}
	t.Fatalf("no step %s", name)
	return 0
}
