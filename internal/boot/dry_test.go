package boot

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/containerd"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
	"github.com/kind-entrypoint/entrypoint/internal/userns"
)

// TestDryRunEvery: a dry run that goes on past a fatal step (check's)
// shows, renders and exits as the one that stops there (--dry-run's), and
// still has the typed facts of every later step.
func TestDryRunEvery(t *testing.T) {
	tree := copyRoot(t, scenario{"rootless-v2-missing-cpu-pids", filepath.Join(hostsDir, "rootless-v2-missing-cpu-pids")})
	if err := hosttest.Files(t, tree).WriteFile("/"+system.ProbeDir+"/random", []byte("kind"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, _ := tree.Environ()
	run := func(every bool) (Dry, string) {
		d := DryRunOn(context.Background(), tree, env, Steps(), DryRunOptions{ProbeTimeout: testProbeTimeout, Every: every})
		var b bytes.Buffer
		if err := d.Render(&b); err != nil {
			t.Fatal(err)
		}
		return d, b.String()
	}
	stop, stopText := run(false)
	every, everyText := run(true)
	if len(stop.Results) != 1 || len(every.Results) != len(Steps()) || len(every.Shown()) != 1 {
		t.Fatalf("results: %d stopping, %d (%d shown) going on; want 1, %d (1)", len(stop.Results), len(every.Results), len(every.Shown()), len(Steps()))
	}
	if stopText != everyText {
		t.Errorf("renders differ:\n%s\n---\n%s", stopText, everyText)
	}
	var se *StepError
	if !errors.As(every.Err, &se) || se.Step != "validate_userns" || ExitCode(every.Err) != ExitCode(stop.Err) {
		t.Errorf("error %v (exit %d), want validate_userns's, as %v", every.Err, ExitCode(every.Err), stop.Err)
	}
	// Step 1 detected, then its plan failed: its facts are there.
	if f, err := FactsOf[userns.Facts](every.Results, "validate_userns"); err != nil || f.NofileHard == 0 {
		t.Errorf("validate_userns facts %+v, %v", f, err)
	}
	if _, err := FactsOf[containerd.Facts](every.Results, "configure_containerd"); err != nil {
		t.Errorf("configure_containerd: %v", err)
	}
	if f, err := FactsOf[network.IptablesFacts](every.Results, "select_iptables"); err != nil || len(f.Saves) == 0 {
		t.Errorf("select_iptables facts %+v, %v", f, err)
	}
	if _, err := FactsOf[containerd.Facts](every.Results, "select_iptables"); err == nil {
		t.Error("FactsOf of the wrong type: no error")
	}
	if _, err := FactsOf[containerd.Facts](stop.Results, "configure_containerd"); err == nil {
		t.Error("FactsOf of a step the run did not reach: no error")
	}
}
