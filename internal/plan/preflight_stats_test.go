package plan

import (
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// statCounter counts the stats a preflight makes.
type statCounter struct {
	system.System
	n int
}

func (s *statCounter) Stat(p string) (fs.FileInfo, error) { s.n++; return s.System.Stat(p) }

// kubeletRootsPlan is what cgroupfix plans for n cgroup mounts under
// /sys/fs/cgroup: two kubelet roots in each, made and bound.
func kubeletRootsPlan(n int) []Action {
	actions := make([]Action, 0, 4*n)
	for i := range n {
		for _, r := range []string{"/kubelet", "/kubelet.slice"} {
			p := "/sys/fs/cgroup/x" + strconv.Itoa(i) + r
			actions = append(actions, Mkdir(p, 0o755), Bind(p, p))
		}
	}
	return actions
}

// TestPreflightStatsOnce: preflighting the kubelet roots of n cgroup
// mounts that a tree does not have stats each mount point once, not each
// root and its parent twice (3n stats, 450k at 150k mounts).
func TestPreflightStatsOnce(t *testing.T) {
	const n = 1000
	root := hosttest.Dir(t, map[string]string{"sys/fs/cgroup/.keep": ""})
	sys := &statCounter{System: system.NewTree(root)}
	if err := Preflight(sys, kubeletRootsPlan(n)); err != nil {
		t.Fatal(err)
	}
	if sys.n > n+10 {
		t.Errorf("%d stats to preflight the kubelet roots of %d mounts; want at most %d", sys.n, n, n+10)
	}
	// Without /sys/fs/cgroup, nothing below it needs a stat.
	bare := &statCounter{System: system.NewTree(t.TempDir())}
	if err := Preflight(bare, kubeletRootsPlan(n)); err != nil {
		t.Fatal(err)
	}
	if bare.n > 10 {
		t.Errorf("%d stats to preflight the kubelet roots of %d mounts under a missing /sys/fs/cgroup; want at most 10", bare.n, n)
	}
}

// TestPreflightDeepPathStats: a path 32k levels deep below a missing
// directory costs the stats of what exists above it, not one per level
// (each resolving the whole path again: 2.6 s of CPU walking up).
func TestPreflightDeepPathStats(t *testing.T) {
	root := hosttest.Dir(t, map[string]string{"sys/fs/cgroup/cpu/.keep": ""})
	sys := &statCounter{System: system.NewTree(root)}
	deep := "/sys/fs/cgroup/cpu" + strings.Repeat("/k", 32000)
	if err := Preflight(sys, []Action{Mkdir(deep+"/kubelet", 0o755), Bind(deep+"/kubelet", deep+"/kubelet")}); err != nil {
		t.Fatal(err)
	}
	// /sys, /sys/fs, /sys/fs/cgroup, /sys/fs/cgroup/cpu, its first k.
	if sys.n > 5 {
		t.Errorf("%d stats to preflight a path 32k levels deep; want at most 5", sys.n)
	}
}

// TestPreflightPlannedDirsCap: a plan making more than MaxPlannedDirs
// directories (ancestors counted) is refused, naming the Mkdir that
// passes the cap; one making them all under a shared deep path is not.
func TestPreflightPlannedDirsCap(t *testing.T) {
	sys := system.NewTree(hosttest.Dir(t, map[string]string{"sys/fs/cgroup/cpu/.keep": ""}))
	deep := strings.Repeat("/k", 2000)
	var shared, branches []Action
	for i := range 1024 {
		shared = append(shared, Mkdir("/sys/fs/cgroup/cpu"+deep+"/c"+strconv.Itoa(i)+"/kubelet", 0o755))
		branches = append(branches, Mkdir("/sys/fs/cgroup/cpu/b"+strconv.Itoa(i)+deep+"/kubelet", 0o755))
	}
	if err := Preflight(sys, shared); err != nil {
		t.Errorf("1024 cgroup mounts under one deep path: %v", err)
	}
	err := Preflight(sys, branches)
	if err == nil || !strings.Contains(err.Error(), `mkdir (planned) "/sys/fs/cgroup/cpu/b32/`) || !strings.Contains(err.Error(), "MaxPlannedDirs") {
		t.Errorf("1024 branches 2000 levels deep: %v, want the cap's error naming the 33rd", err)
	}
}

// BenchmarkPreflightKubeletRoots preflights the kubelet roots of 20k
// cgroup mounts (the worst fixture has 13): each makes 3 directories, so
// 20k is about as many as MaxPlannedDirs lets a plan make (150k, what
// the mount table's 16 MiB cap holds, is refused at the 21,845th).
func BenchmarkPreflightKubeletRoots(b *testing.B) {
	actions := kubeletRootsPlan(20_000)
	sys := system.NewTree(b.TempDir())
	b.ReportAllocs()
	for b.Loop() {
		if err := Preflight(sys, actions); err != nil {
			b.Fatal(err)
		}
	}
}
