package boot

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
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
	st := every.Host.State
	if f, err := st.Rootless.Get(); err != nil || f.NofileHard == 0 {
		t.Errorf("validate_userns facts %+v, %v", f, err)
	}
	if _, err := st.Containerd.Get(); err != nil {
		t.Errorf("configure_containerd: %v", err)
	}
	if f, err := st.Iptables.Get(); err != nil || len(f.Saves) == 0 {
		t.Errorf("select_iptables facts %+v, %v", f, err)
	}
	if _, err := st.CgroupV1.Get(); err == nil {
		t.Error("fix_cgroup's v1 facts on cgroup v2: no error")
	}
	if f, err := stop.Host.State.Containerd.Get(); err == nil {
		t.Errorf("facts of a step the run did not reach: %+v, no error", f)
	}
}
