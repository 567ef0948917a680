package cgroupfix_test

// Privileged tests (tier 2): the kubelet roots are planned and made with the
// real kernel, in a cgroup v1 hierarchy, but only under a child cgroup the
// test creates for itself and reaches through a bind mount in its own mount
// namespace; everything is removed afterwards, and TestMain checks that the
// machine's mount table is unchanged.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

func TestMain(m *testing.M) { nstest.Sandbox(m, nil) }

// v1Hierarchy picks a cgroup v1 hierarchy of the mount table: cpuset when
// mounted (its kubelet roots need cpus and mems copied), else the first.
func v1Hierarchy(mi []*mountinfo.Info) *mountinfo.Info {
	var first *mountinfo.Info
	for _, m := range mi {
		if m.FSType != "cgroup" {
			continue
		}
		if cgroupfix.IsCpusetMount(m) {
			return m
		}
		if first == nil {
			first = m
		}
	}
	return first
}

// TestKubeletRootsOnV1Hierarchy plans fix_cgroup (cgroupns case) for one
// real v1 hierarchy, seen through a bind of a fresh child cgroup, applies
// the actions for that hierarchy with the real kernel, and checks that
// /kubelet and /kubelet.slice exist there as self-bound cgroups (with the
// parent's cpus and mems on cpuset). Then it removes everything and checks
// that nothing is left on the machine.
func TestKubeletRootsOnV1Hierarchy(t *testing.T) {
	nstest.Unshare(t, unix.CLONE_NEWNS)
	h := v1Hierarchy(nstest.ThreadMountinfo(t))
	if h == nil {
		t.Fatal("no cgroup v1 hierarchy is mounted (no fstype cgroup in /proc/thread-self/mountinfo): this test needs a cgroup v1 or hybrid host, as CI is")
	}
	cpuset := cgroupfix.IsCpusetMount(h)
	// The sandbox made it read-only; the test's cgroup is made there.
	nstest.Writable(t, h.Mountpoint)
	name := fmt.Sprintf("entrypoint-test-%d", os.Getpid())
	child := filepath.Join(h.Mountpoint, name)
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatalf("create the test's cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Rmdir(child); err != nil && !errors.Is(err, unix.ENOENT) {
			t.Errorf("remove the test's cgroup %s: %v", child, err)
		}
	})
	var cpus, mems []byte
	if cpuset {
		// A new cpuset cgroup starts with no cpus and mems; the kubelet
		// roots below it could take none. The node's cgroup has them.
		cpus, mems = readFile(t, filepath.Join(h.Mountpoint, "cpuset.cpus")), readFile(t, filepath.Join(h.Mountpoint, "cpuset.mems"))
		writeFile(t, filepath.Join(child, "cpuset.cpus"), cpus)
		writeFile(t, filepath.Join(child, "cpuset.mems"), mems)
	}

	hier := t.TempDir()
	if err := unix.Mount(child, hier, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s on %s: %v", child, hier, err)
	}
	t.Cleanup(func() { unmountIfMounted(t, hier) })
	for _, r := range cgroupfix.KubeletRoots {
		p := hier + r
		t.Cleanup(func() {
			unmountIfMounted(t, p)
			if err := unix.Rmdir(p); err != nil && !errors.Is(err, unix.ENOENT) {
				t.Errorf("remove %s: %v", p, err)
			}
		})
	}

	bound := system.Top(nstest.ThreadMountinfo(t), hier)
	if bound == nil || bound.FSType != "cgroup" || bound.Root != path.Join(h.Root, name) {
		t.Fatalf("bind of the test's cgroup at %s: %+v", hier, bound)
	}
	// What DetectV1 would find on a node whose only v1 hierarchy is this one.
	facts := cgroupfix.V1Facts{Current: "/", Mounts: []*mountinfo.Info{bound}, Cpuset: map[string][2][]byte{}}
	if cpuset {
		facts.Cpuset[hier] = [2][]byte{readFile(t, filepath.Join(hier, "cpuset.cpus")), readFile(t, filepath.Join(hier, "cpuset.mems"))}
	}
	actions, err := cgroupfix.PlanV1(facts)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	// Only the test's hierarchy is changed. Whatever else the plan holds must
	// be one of the two changes fix_cgroup makes outside the hierarchies it
	// is given, and those are not made here: they would reach the machine's
	// /sys/fs/cgroup.
	var mine []plan.Action
	for _, a := range plan.Changes(actions) {
		switch {
		case a.Path == hier || strings.HasPrefix(a.Path, hier+"/"):
			mine = append(mine, a)
		case a.Op == plan.OpMount && a.Path == "/sys/fs/cgroup" && a.Flags == system.Rec|system.Private:
			t.Logf("not applied (outside the test's hierarchy): %s", a)
		case strings.HasPrefix(a.Path, "/sys/fs/cgroup/systemd/kubelet.slice"):
			// No name=systemd hierarchy among the facts: the WSL2 case.
			t.Logf("not applied (the test's facts have no name=systemd hierarchy): %s", a)
		default:
			t.Fatalf("plan for the test's hierarchy %s changes something outside it: %s", hier, a)
		}
	}
	var logs bytes.Buffer
	if err := plan.Apply(context.Background(), system.Linux{}, logline.New(&logs, logline.Text), mine, false); err != nil {
		t.Fatalf("apply: %v\nactions:\n%s", err, mine)
	}

	mi := nstest.ThreadMountinfo(t)
	for _, r := range cgroupfix.KubeletRoots {
		p := hier + r
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err != nil {
			t.Errorf("%s is not a cgroup: %v", p, err)
		}
		m := system.Top(mi, p)
		if m == nil {
			t.Errorf("%s is not a mount point: want it bound onto itself", p)
		} else if want := path.Join(h.Root, name) + r; m.FSType != "cgroup" || m.Root != want {
			t.Errorf("mount at %s: %s root %s, want a self bind (cgroup, root %s)", p, m.FSType, m.Root, want)
		}
		if cpuset {
			for file, want := range map[string][]byte{"cpuset.cpus": cpus, "cpuset.mems": mems} {
				if got := readFile(t, filepath.Join(p, file)); !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
					t.Errorf("%s/%s = %q, want the parent's %q", p, file, got, want)
				}
			}
		}
	}

	// Take it all down now, so that the machine can be checked.
	for _, r := range cgroupfix.KubeletRoots {
		unmountIfMounted(t, hier+r)
		if err := unix.Rmdir(hier + r); err != nil {
			t.Errorf("remove %s: %v", hier+r, err)
		}
	}
	unmountIfMounted(t, hier)
	if err := unix.Rmdir(child); err != nil {
		t.Errorf("remove the test's cgroup %s: %v", child, err)
	}
	nstest.OnHost(func() {
		if _, err := os.Lstat(child); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the machine still has %s: %v", child, err)
		}
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Error(err)
		} else if bytes.Contains(b, []byte(name)) {
			t.Errorf("the machine's mount table names %s:\n%s", name, b)
		}
	})
}

func unmountIfMounted(t *testing.T, p string) {
	t.Helper()
	if system.Top(nstest.ThreadMountinfo(t), p) == nil {
		return
	}
	if err := unix.Unmount(p, 0); err != nil {
		t.Errorf("unmount %s: %v", p, err)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes a cgroup control file (no temp file: cgroupfs has none).
func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
