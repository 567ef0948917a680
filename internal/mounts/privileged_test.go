package mounts_test

// Privileged tests (tier 2): real mount(2) calls in namespaces each test
// makes for itself. They never touch the machine's own /sys: the read-only
// remount is tried on a fresh sysfs mounted inside a new network namespace,
// which gets a superblock of its own, and TestMain checks that the machine's
// mount table is byte-for-byte unchanged after the run.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/mounts"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

func TestMain(m *testing.M) { nstest.Sandbox(m, nil) }

// threadLinux is the real system, except that /proc/self/mountinfo is the
// mount table of the calling thread's namespace: /proc/self names the main
// thread, which stays in the machine's namespace.
type threadLinux struct{ system.Linux }

func (l threadLinux) ReadFile(p string, limit int) ([]byte, error) {
	if p == "/proc/self/mountinfo" {
		p = "/proc/thread-self/mountinfo"
	}
	return l.Linux.ReadFile(p, system.LimitTable)
}

func apply(t *testing.T, sys system.System, actions ...plan.Action) {
	t.Helper()
	var logs bytes.Buffer
	if err := plan.Apply(context.Background(), sys, logline.New(&logs, logline.Text), actions, false); err != nil {
		t.Fatalf("apply %q: %v (log: %q)", actions, err, logs.String())
	}
}

// TestSysReadOnlyOnFreshSysfs applies SysReadOnly, with the real kernel, to
// a sysfs of the test's own: read-only afterwards, its other flags kept, and
// only the mount changed, not the superblock (a plain remount would make
// every mount of that sysfs read-only, the host's /sys included when the
// node shares the host's network namespace).
func TestSysReadOnlyOnFreshSysfs(t *testing.T) {
	hostSys := hostMountLine(t, "/sys")
	nstest.Unshare(t, unix.CLONE_NEWNS|unix.CLONE_NEWNET)
	dir := t.TempDir()
	const opts = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RELATIME
	if err := unix.Mount("sysfs", dir, "sysfs", opts, ""); err != nil {
		t.Fatalf("mount a fresh sysfs on %s: %v", dir, err)
	}
	// Registered after TempDir, so it runs before TempDir's removal.
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})

	mi := nstest.ThreadMountinfo(t)
	fresh := system.Top(mi, dir)
	if fresh == nil {
		t.Fatalf("no mount at %s in /proc/thread-self/mountinfo", dir)
	}
	// Refuse to go on unless the kernel gave the new network namespace a
	// sysfs superblock of its own: each superblock has its own device.
	if sys := system.Top(mi, "/sys"); sys != nil && sys.Major == fresh.Major && sys.Minor == fresh.Minor {
		t.Fatalf("the fresh sysfs shares the machine's /sys superblock (%d:%d); not remounting it", sys.Major, sys.Minor)
	}
	if fresh.FSType != "sysfs" || fresh.Options != "rw,nosuid,nodev,noexec,relatime" || !firstOptionIs(fresh.VFSOptions, "rw") {
		t.Fatalf("fresh sysfs mounted as %q, per-mount %q, superblock %q; want sysfs rw,nosuid,nodev,noexec,relatime, superblock rw",
			fresh.FSType, fresh.Options, fresh.VFSOptions)
	}
	probe := filepath.Join(dir, "entrypoint-test-probe")
	if err := createFile(probe); errors.Is(err, unix.EROFS) {
		t.Fatalf("creating %s fails with EROFS before the remount: the test could not tell the remount's effect", probe)
	}

	apply(t, system.Linux{}, mounts.SysReadOnly(fresh))

	got := system.Top(nstest.ThreadMountinfo(t), dir)
	if got == nil {
		t.Fatalf("no mount at %s after the remount", dir)
	}
	if got.ID != fresh.ID {
		t.Errorf("mount id %d, was %d: want the same mount remounted, not a new one", got.ID, fresh.ID)
	}
	if want := "ro,nosuid,nodev,noexec,relatime"; got.Options != want {
		t.Errorf("per-mount options %q, want %q", got.Options, want)
	}
	if !firstOptionIs(got.VFSOptions, "rw") {
		t.Errorf("superblock options %q: the sysfs superblock was remounted read-only; want a per-mount (bind) remount leaving it rw", got.VFSOptions)
	}
	if err := createFile(probe); !errors.Is(err, unix.EROFS) {
		t.Errorf("create %s: %v, want EROFS", probe, err)
	}
	// An existing writable attribute: opening it for writing must fail
	// (nothing is ever written to it).
	for _, attr := range []string{"kernel/rcu_expedited", "kernel/profiling"} {
		p := filepath.Join(dir, attr)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		if !errors.Is(err, unix.EROFS) {
			t.Errorf("open %s for writing: %v, want EROFS", p, err)
		}
		break
	}

	if after := hostMountLine(t, "/sys"); after != hostSys {
		t.Errorf("the machine's /sys changed:\n was %s\n now %s", hostSys, after)
	}
}

func createFile(p string) error {
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err == nil {
		unix.Close(fd)
		unix.Unlink(p)
	}
	return err
}

func firstOptionIs(opts, want string) bool {
	first, _, _ := strings.Cut(opts, ",")
	return first == want
}

// TestRootMadeShared detects and plans fix_mount in a new mount namespace
// whose "/" is private, applies the planned rshared mount of "/", and checks
// that every mount is then shared and that planning again plans the same
// remount, marked as made on every boot (as the script does).
func TestRootMadeShared(t *testing.T) {
	hostRoot := hostMountLine(t, "/")
	nstest.Unshare(t, unix.CLONE_NEWNS)
	sys := threadLinux{}
	f, err := mounts.Detect(sys, os.Getenv("PATH"), nil)
	if err != nil {
		t.Fatalf("detect: %v", err)
	}
	var rshared []plan.Action
	for _, a := range mounts.Plan(f) {
		if a.Op == plan.OpMount && a.Path == "/" {
			rshared = append(rshared, a)
		}
	}
	if len(rshared) != 1 || rshared[0].Flags != system.Rec|system.Shared {
		t.Fatalf("plan has %q for /, want one mount (rec,shared)", rshared)
	}

	apply(t, system.Linux{}, rshared...)

	mi := nstest.ThreadMountinfo(t)
	root := system.Top(mi, "/")
	if root == nil || !system.IsShared(root) {
		t.Fatalf("/ is not shared after the remount: %+v", root)
	}
	for _, m := range mi {
		if !system.IsShared(m) {
			t.Errorf("%s is not shared (optional fields %q): want the change recursive", m.Mountpoint, m.Optional)
		}
	}
	f, err = mounts.Detect(sys, os.Getenv("PATH"), nil)
	if err != nil {
		t.Fatalf("detect again: %v", err)
	}
	for _, a := range mounts.Plan(f) {
		if a.Op == plan.OpMount && a.Path == "/" && !a.EveryBoot {
			t.Errorf("planning again wants %s, not marked as made on every boot", a)
		}
	}
	if after := hostMountLine(t, "/"); after != hostRoot {
		t.Errorf("the machine's / changed:\n was %s\n now %s", hostRoot, after)
	}
}

// hostMountLine returns the line of the original namespace's
// /proc/self/mountinfo for mountpoint p ("" when none), read on a host
// thread.
func hostMountLine(t testing.TB, p string) string {
	t.Helper()
	var line string
	var err error
	nstest.OnHost(func() {
		var b []byte
		if b, err = os.ReadFile("/proc/self/mountinfo"); err != nil {
			return
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 4 && f[4] == p {
				line = l
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return line
}
