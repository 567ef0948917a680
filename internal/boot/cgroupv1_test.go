package boot

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// TestCgroupV1LineBeforeFailing: kind's CLI waits for "detected cgroup v1"
// in the node's log; the script prints it before it reads anything of the
// host's cgroups, so a node that then fails still says it (and kind
// reports the failure instead of waiting). Ours must too, in a run and in
// a dry run's plan.
func TestCgroupV1LineBeforeFailing(t *testing.T) {
	const selfCgroup = "/proc/self/cgroup"
	for name, content := range map[string]*string{
		"no cpu line":     new("12:memory:/docker/abc\n1:name=systemd:/docker/abc\n"),
		"empty":           new(""),
		"only the v2 one": new("0::/\n"),
		"missing":         nil,
	} {
		t.Run(name, func(t *testing.T) {
			s := scenario{"docker-v1-cgroupns", filepath.Join(hostsDir, "docker-v1-cgroupns")}
			tree := copyRoot(t, s)
			var err error
			if content == nil {
				err = hosttest.Files(t, tree).Remove(selfCgroup)
			} else {
				err = hosttest.Files(t, tree).WriteFile(selfCgroup, []byte(*content), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			h := detect(t, tree)
			results, dryErr := DryRun(context.Background(), h, Steps())
			last := results[len(results)-1]
			if last.Step != "fix_cgroup" || dryErr == nil {
				t.Fatalf("dry run stopped at %s (%v), want fix_cgroup failing", last.Step, dryErr)
			}
			if len(last.Actions) != 1 || last.Actions[0].String() != "log INFO: detected cgroup v1" {
				t.Errorf("fix_cgroup plans %q before failing, want the line kind waits for", last.Actions)
			}

			var logs bytes.Buffer
			err = Run(context.Background(), detect(t, tree), Steps(), logline.New(&logs, logline.Text))
			if ExitCode(err) != 15 {
				t.Fatalf("run: %v (exit %d), want fix_cgroup's 15", err, ExitCode(err))
			}
			lines := strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n")
			if got := lines[len(lines)-1]; got != "INFO: detected cgroup v1" {
				t.Errorf("last line before the error %q, want %q; log:\n%s", got, "INFO: detected cgroup v1", logs.String())
			}
		})
	}
}
