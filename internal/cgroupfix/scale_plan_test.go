package cgroupfix

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/moby/sys/mountinfo"
)

// nestedCpusets are the facts of a cgroupns host with n cpuset mounts
// nested under its cpuset hierarchy, each depth levels down; foreign
// mounts show cgroups of other roots, which no hierarchy mount shows.
func nestedCpusets(n, depth int, foreign bool) V1Facts {
	f := V1Facts{Current: "/", Cpuset: map[string][2][]byte{}}
	for i := range n {
		root := "/"
		if foreign {
			root = "/other" + strconv.Itoa(i)
		}
		f.Mounts = append(f.Mounts, &mountinfo.Info{
			ID: 5000 + i, Major: 0, Minor: 36, Root: root, FSType: "cgroup", VFSOptions: "rw,cpuset",
			Mountpoint: Root + "/cpuset" + strings.Repeat("/k", i%depth) + "/n" + strconv.Itoa(i),
		})
	}
	// The hierarchy mount last: every nested mount looked for it.
	f.Mounts = append(f.Mounts, &mountinfo.Info{ID: 1056, Minor: 36, Root: "/", FSType: "cgroup", VFSOptions: "rw,cpuset", Mountpoint: Root + "/cpuset"})
	f.Cpuset[Root+"/cpuset"] = [2][]byte{[]byte("0-3\n"), []byte("0\n")}
	return f
}

// TestPlanV1NestedCpusetsAllocs: planning nested cpuset mounts allocates
// in one go what the plan holds (its actions, its paths' text), never
// a doubling (the cpuset roots' files were not counted, and 50k
// mounts grew both by doubling). The bound is 1.75 times the plan's own
// size (its maps, a little slack in the paths' text): the old code
// allocated 2.7 times.
func TestPlanV1NestedCpusetsAllocs(t *testing.T) {
	f := nestedCpusets(5000, 200, false)
	var actions, text int
	res := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			a, err := PlanV1(f)
			if err != nil {
				b.Fatal(err)
			}
			actions, text = len(a), 0
			for _, x := range a {
				text += len(x.Path)
			}
		}
	})
	const actionSize = 184 // plan.TestActionSize
	own := int64(actions*actionSize + text)
	if got := res.AllocedBytesPerOp(); got > own*7/4 {
		t.Errorf("planning %d nested cpuset mounts allocated %d bytes; the plan is %d (%d actions, %d bytes of paths): want at most 1.75 times that", len(f.Mounts), got, own, actions, text)
	}
}

// TestPlanV1ForeignCpusets: a cpuset mount of a cgroup no hierarchy mount
// shows gets no cpuset files, one that some mount shows gets its files,
// however many mounts there are.
func TestPlanV1ForeignCpusets(t *testing.T) {
	f := nestedCpusets(3, 2, true)
	f.Mounts = append(f.Mounts, &mountinfo.Info{ID: 9000, Minor: 36, Root: "/", FSType: "cgroup", VFSOptions: "rw,cpuset", Mountpoint: "/elsewhere"})
	shown := cpusetShown(f)
	for _, m := range f.Mounts {
		_, ok := cpusetOf(f, shown, m)
		if want := m.Root == "/"; ok != want {
			t.Errorf("%s (root %s): cpuset files found %t, want %t", m.Mountpoint, m.Root, ok, want)
		}
	}
}

// BenchmarkPlanV1ForeignCpusets plans 50k cpuset mounts of cgroups no
// hierarchy mount shows: the old code looked each up in the whole table,
// 2.5G lookups, 167 s; 0.33 s now.
func BenchmarkPlanV1ForeignCpusets(b *testing.B) {
	f := nestedCpusets(50_000, 200, true)
	b.ReportAllocs()
	for b.Loop() {
		PlanV1(f)
	}
}

// BenchmarkPlanV1NestedCpusets plans 50k nested cpuset mounts, ten times
// TestPlanV1NestedCpusetsAllocs.
func BenchmarkPlanV1NestedCpusets(b *testing.B) {
	f := nestedCpusets(50_000, 200, false)
	b.ReportAllocs()
	for b.Loop() {
		PlanV1(f)
	}
}

// procCgroupsAtCap is a /proc/cgroups at the read limit, every line a
// distinct enabled controller that no mount carries: every one is hidden.
func procCgroupsAtCap() []byte {
	var b strings.Builder
	b.WriteString("#subsys_name\thierarchy\tnum_cgroups\tenabled\n")
	for i := 0; b.Len() < system.LimitConfig-32; i++ {
		b.WriteString("c" + strconv.Itoa(i) + "\t0\t1\t1\n")
	}
	return []byte(b.String())
}

// TestHideControllersAtCap: with tens of thousands of controllers to
// hide, every one leaves the fake /proc/cgroups and the log names each.
func TestHideControllersAtCap(t *testing.T) {
	f := V1Facts{Current: "/", ProcCgroups: procCgroupsAtCap()}
	actions, err := PlanV1(f)
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(f.ProcCgroups), "\n") - 1
	for _, a := range actions {
		if a.Op == plan.OpWrite && a.Path == FakeCgroups {
			if got := string(a.Data); got != "#subsys_name\thierarchy\tnum_cgroups\tenabled\n" {
				t.Errorf("fake /proc/cgroups keeps %d bytes of controllers, want none", len(got))
			}
			return
		}
	}
	t.Fatalf("no write of %s among %d actions for %d controllers", FakeCgroups, len(actions), n)
}

// BenchmarkHideControllersAtCap: the lookups of hiding are sets, so a
// /proc/cgroups at its cap with every controller hidden plans in linear
// time (with a list per line it was lines times names).
func BenchmarkHideControllersAtCap(b *testing.B) {
	f := V1Facts{Current: "/", ProcCgroups: procCgroupsAtCap()}
	b.ReportAllocs()
	for b.Loop() {
		PlanV1(f)
	}
}
