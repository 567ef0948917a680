package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// cgroupMountTable is n cgroup v1 mounts below /sys/fs/cgroup, every
// tenth read-only.
func cgroupMountTable(n int) []*mountinfo.Info {
	mi := make([]*mountinfo.Info, n)
	for i := range mi {
		opts := "rw,relatime"
		if i%10 == 0 {
			opts = "ro,relatime"
		}
		mi[i] = &mountinfo.Info{ID: i + 2, Parent: 1, Mountpoint: fmt.Sprintf("/sys/fs/cgroup/c%d", i), Options: opts, FSType: "cgroup", VFSOptions: "rw,memory"}
	}
	return mi
}

// TestCgroupMountsRowBounded: the cgroup-mounts row of 70k mounts (the
// held-out host that took check a minute) allocates a bounded
// amount and names at most maxListed mounts.
func TestCgroupMountsRowBounded(t *testing.T) {
	c := &checker{mi: cgroupMountTable(70_000)}
	var r Row
	if n := testing.AllocsPerRun(1, func() { r = c.cgroupMounts() }); n > 2000 {
		t.Errorf("%v allocations for the row of 70k mounts", n)
	}
	if r.Status != Fail || strings.Count(r.Observed, "/sys/fs/cgroup/") != maxListed || !strings.HasSuffix(r.Observed, "(and 6990 more)") {
		t.Errorf("row %+v", r)
	}
}

// BenchmarkCgroupMountsRow is the row of 7k mounts and of 70k (the size of a
// real host's table, which took check a minute of CPU).
func BenchmarkCgroupMountsRow(b *testing.B) {
	for _, n := range []int{7_000, 70_000} {
		c := &checker{mi: cgroupMountTable(n)}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				c.cgroupMounts()
			}
		})
	}
}

// TestPlanRowAllocs: the plan row counts 300k changes without copying
// them (a plan of 150k cgroup mounts; check allocated 1 GiB for it).
func TestPlanRowAllocs(t *testing.T) {
	actions := make([]plan.Action, 300_000)
	for i := range actions {
		actions[i] = plan.Mkdir(fmt.Sprintf("/sys/fs/cgroup/c%d/kubelet", i), 0o755)
	}
	results := []boot.Result{{Step: "fix_cgroup", Actions: actions}}
	c := &checker{}
	var r Row
	if n := testing.AllocsPerRun(1, func() { r = c.plan(results, nil) }); n > 10 {
		t.Errorf("%v allocations for the plan row", n)
	}
	if !strings.Contains(r.Observed, "300000 changes") {
		t.Errorf("row %+v", r)
	}
}
