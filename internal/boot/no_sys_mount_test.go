package boot

import (
	"context"
	"io"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// TestNoSysMount: a mount table without /sys is planned and
// run without a nil dereference: fix_mount warns and goes on.
func TestNoSysMount(t *testing.T) {
	tree := copyRoot(t, scenario{"docker-v2-cgroupns", hostsDir + "/docker-v2-cgroupns"})
	hosttest.AddFiles(t, tree.Root, map[string]string{
		"proc/self/mountinfo": "1 0 0:1 / / rw shared:1 - overlay overlay rw\n",
	})
	h := detect(t, tree)
	results, err := DryRun(context.Background(), h, Steps())
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if got := results[3].Facts[1]; got != (Fact{"/sys", "nothing mounted"}) {
		t.Errorf("fix_mount's /sys fact = %v", got)
	}
	h.Rand = fixedRand()
	if err := Run(context.Background(), h, Steps(), logline.New(io.Discard, logline.Text)); err != nil {
		t.Fatalf("run: %v", err)
	}
}
