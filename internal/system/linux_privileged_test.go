package system_test

// Privileged tests (tier 2) of Linux, the real System: mounts, atomic and
// in-place writes and the overlay trial with the real kernel, each in a
// mount namespace of the test's own. TestMain checks afterwards that the
// machine's mount table is unchanged; it also serves the helper processes
// of exec_test.go.

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

func TestMain(m *testing.M) {
	// Before anything else, so that a helper sees the process as exec left it.
	if mode, ok := os.LookupEnv(helperEnv); ok {
		os.Exit(helperMain(mode))
	}
	nstest.Sandbox(m, nil)
}

// TestLinuxMount mounts, bind-remounts read-only and unmounts a tmpfs, and
// checks that failures are MountErrors naming every argument.
func TestLinuxMount(t *testing.T) {
	nstest.Unshare(t, unix.CLONE_NEWNS)
	var sys system.Linux
	dir := t.TempDir()
	if err := sys.Mount("tmpfs", dir, "tmpfs", system.NoSuid|system.NoDev, "size=1m,mode=0755"); err != nil {
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	m := system.Top(nstest.ThreadMountinfo(t), dir)
	if m == nil || m.FSType != "tmpfs" || m.Options != "rw,nosuid,nodev,relatime" || !strings.Contains(m.VFSOptions, "size=1024k") {
		t.Fatalf("after mount: %+v", m)
	}
	if got, err := sys.FSType(dir); err != nil || got != "tmpfs" {
		t.Errorf("FSType(%s) = %q, %v; want tmpfs", dir, got, err)
	}

	flags := system.Remount | system.Bind | system.ReadOnly | system.FlagsFromOptions(m.Options)
	if err := sys.Mount("", dir, "", flags, ""); err != nil {
		t.Fatalf("bind remount ro: %v", err)
	}
	ro := system.Top(nstest.ThreadMountinfo(t), dir)
	if ro.Options != "ro,nosuid,nodev,relatime" || !strings.HasPrefix(ro.VFSOptions, "rw,") {
		t.Errorf("after bind remount ro: per-mount %q, superblock %q; want ro,nosuid,nodev,relatime and rw", ro.Options, ro.VFSOptions)
	}
	if err := sys.WriteFile(filepath.Join(dir, "f"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("write on the read-only mount: %v, want EROFS", err)
	}

	missing := filepath.Join(dir, "missing")
	err := sys.Mount("tmpfs", missing, "tmpfs", system.NoSuid|system.NoExec, "size=1m")
	var me *system.MountError
	if !errors.As(err, &me) || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("mount on a missing target: %v (%T), want a MountError wrapping ENOENT", err, err)
	}
	if me.Op != "mount" || me.Source != "tmpfs" || me.Target != missing || me.FSType != "tmpfs" || me.Flags != system.NoSuid|system.NoExec || me.Data != "size=1m" {
		t.Errorf("MountError fields: %+v", me)
	}
	if want := "mount tmpfs on " + missing + ` type tmpfs (nosuid,noexec, data "size=1m"): no such file or directory`; err.Error() != want {
		t.Errorf("error:\n got %s\nwant %s", err, want)
	}

	if err := sys.Unmount(dir, 0); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	if m := system.Top(nstest.ThreadMountinfo(t), dir); m != nil {
		t.Errorf("still mounted after unmount: %+v", m)
	}
	err = sys.Unmount(dir, 0)
	if !errors.As(err, &me) || me.Op != "umount" || me.Target != dir || !errors.Is(err, unix.EINVAL) {
		t.Errorf("unmount of a directory that is no mount point: %v, want a umount MountError wrapping EINVAL", err)
	}
}

// TestLinuxWriteFile checks the atomic write (a new inode renamed over the
// old, exact mode, no temp file left even when the rename fails) and the
// in-place write a bind-mounted file needs.
func TestLinuxWriteFile(t *testing.T) {
	nstest.Unshare(t, unix.CLONE_NEWNS)
	var sys system.Linux
	dir := t.TempDir()
	if err := sys.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	p := filepath.Join(dir, "file")
	if err := sys.WriteFile(p, []byte("one"), 0o664); err != nil {
		t.Fatal(err)
	}
	old, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := sys.WriteFile(p, []byte("two"), 0o604); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Errorf("%s = %q, want two", p, b)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode() != 0o604 {
		t.Errorf("mode %v (%v), want exactly -rw----r-- whatever the umask", fi.Mode(), err)
	}
	// A reader of the old file keeps the old content: the write replaced it
	// whole rather than rewriting it.
	buf := make([]byte, 8)
	if n, _ := old.ReadAt(buf, 0); string(buf[:n]) != "one" {
		t.Errorf("the old file reads %q, want one (replaced by rename, not rewritten)", buf[:n])
	}

	// A bind-mounted file cannot be renamed over: the write fails, leaving
	// the file and no temp file behind.
	src, target := filepath.Join(dir, "src"), filepath.Join(dir, "target")
	for _, f := range []string{src, target} {
		if err := os.WriteFile(f, []byte("bound"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := sys.Mount(src, target, "", system.Bind, ""); err != nil {
		t.Fatal(err)
	}
	if err := sys.WriteFile(target, []byte("lost"), 0o644); !errors.Is(err, unix.EBUSY) {
		t.Errorf("atomic write over a bind-mounted file: %v, want EBUSY", err)
	}
	if err := sys.WriteFileInPlace(target, []byte("in place")); err != nil {
		t.Errorf("in-place write of a bind-mounted file: %v", err)
	}
	if b, _ := os.ReadFile(src); string(b) != "in place" {
		t.Errorf("the bind's source reads %q, want the in-place write", b)
	}
	if err := sys.WriteFile(filepath.Join(dir, "no", "such"), []byte("x"), 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write into a missing directory: %v, want ErrNotExist", err)
	}
	names := hosttest.DirNames(t, dir)
	if want := "file src target"; strings.Join(names, " ") != want {
		t.Errorf("%s holds %q, want %q: no temp file may be left", dir, names, want)
	}
}

// TestLinuxOverlayTrial runs the overlay trial for real: it succeeds as
// root, and leaves neither its temp dir nor a mount behind.
func TestLinuxOverlayTrial(t *testing.T) {
	nstest.Unshare(t, unix.CLONE_NEWNS)
	if b, err := os.ReadFile("/proc/filesystems"); err == nil && !bytes.Contains(b, []byte("\toverlay\n")) {
		t.Skip("the kernel has no overlay filesystem (not in /proc/filesystems)")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	before := len(nstest.ThreadMountinfo(t))
	if err := (system.Linux{}).OverlayTrial(); err != nil {
		t.Fatalf("overlay trial: %v", err)
	}
	if names := hosttest.DirNames(t, tmp); len(names) != 0 {
		t.Errorf("the trial left %q in its temp dir", names)
	}
	if after := nstest.ThreadMountinfo(t); len(after) != before {
		t.Errorf("%d mounts before the trial, %d after", before, len(after))
	}
}
