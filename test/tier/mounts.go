package tier

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Mounts returns init's mount table in the node, parsed as the entrypoint
// parses one.
func (n TestNode) Mounts() []*mountinfo.Info {
	n.T.Helper()
	ms, err := system.ParseMountinfo([]byte(n.MustExec("cat", "/proc/1/mountinfo")))
	if err != nil {
		n.T.Fatalf("%s: %v", n.Name, err)
	}
	return ms
}

// cgroupV1Hierarchies returns the names of the cgroup v1 hierarchies
// mounted directly under /sys/fs/cgroup in ms (cpu, memory, systemd...).
func cgroupV1Hierarchies(ms []*mountinfo.Info) []string {
	var out []string
	for _, m := range ms {
		dir, ok := strings.CutPrefix(m.Mountpoint, "/sys/fs/cgroup/")
		if m.FSType == "cgroup" && ok && !strings.Contains(dir, "/") {
			out = append(out, dir)
		}
	}
	return out
}

// CheckKubeletRoots checks that /kubelet and /kubelet.slice are mounted,
// in the node's mount table ms, under every cgroup v1 hierarchy the node
// had when the entrypoint ran. Those are the host's mounted v1
// hierarchies, which runc mirrors into the node; systemd in the node later
// mounts the enabled controllers the host leaves unmounted (here
// net_cls,net_prio, perf_event, hugetlb): the entrypoint never saw those,
// so they are logged, not required. A host without v1 hierarchies fails
// the test: the check needs a v1 (hybrid) host.
func CheckKubeletRoots(t testing.TB, ms []*mountinfo.Info) {
	t.Helper()
	data, err := os.ReadFile(system.MountinfoPath)
	if err != nil {
		t.Fatal(err)
	}
	host, err := system.ParseMountinfoFile(data)
	if err != nil {
		t.Fatal(err)
	}
	want := cgroupV1Hierarchies(host)
	if len(want) == 0 {
		t.Fatal("the host mounts no cgroup v1 hierarchy under /sys/fs/cgroup: this check needs a v1 (hybrid) host")
	}
	var later []string
	for _, h := range cgroupV1Hierarchies(ms) {
		if !slices.Contains(want, h) {
			later = append(later, h)
		}
	}
	if len(later) > 0 {
		t.Logf("v1 hierarchies mounted after the entrypoint (by systemd), not checked: %v", later)
	}
	points := map[string]bool{}
	for _, m := range ms {
		points[m.Mountpoint] = true
	}
	for _, h := range want {
		mp := "/sys/fs/cgroup/" + h
		if !points[mp] {
			t.Errorf("cgroup v1 hierarchy %s is not mounted in the node", mp)
			continue
		}
		for _, sub := range []string{"kubelet", "kubelet.slice"} {
			if !points[mp+"/"+sub] {
				t.Errorf("%s/%s is not mounted", mp, sub)
			}
		}
	}
}
