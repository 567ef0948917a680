package system

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

const sampleMountinfo = `1 0 0:1 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/l
2 1 0:2 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw
3 2 0:3 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:5 - tmpfs tmpfs rw,mode=755
4 3 0:4 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:6 - cgroup cgroup rw,pids
5 1 0:5 /containers/abc/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda rw
6 1 0:6 / /kind rw - zfs pool/kind rw
7 1 0:7 / /with\040space rw - tmpfs tmpfs rw
`

func newTestTree(t *testing.T) *Tree {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"proc/self", "sys/fs/cgroup/pids", "etc", "kind", "with space", "proc"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"proc/self/mountinfo": sampleMountinfo,
		"etc/resolv.conf":     "nameserver 127.0.0.11\n",
		"proc/cgroups":        "#subsys_name\nmisc\t1\t1\t1\n",
		"kind/fake":           "fake\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return NewTree(dir)
}

func mountsOf(t *testing.T, tree *Tree) map[string]*mountinfo.Info {
	t.Helper()
	b, err := tree.ReadFile("/proc/self/mountinfo", LimitTable)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := mountinfo.GetMountsFromReader(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatalf("tree wrote unparsable mountinfo: %v\n%s", err, b)
	}
	out := map[string]*mountinfo.Info{}
	for _, m := range mi {
		out[m.Mountpoint] = m
	}
	return out
}

func TestTreeMountModel(t *testing.T) {
	tree := newTestTree(t)
	if err := tree.Mount("", "/sys", "", Remount|Bind|ReadOnly|NoSuid|NoDev|NoExec|RelAtime, ""); err != nil {
		t.Fatal(err)
	}
	m := mountsOf(t, tree)["/sys"]
	if m.Options != "ro,nosuid,nodev,noexec,relatime" || m.VFSOptions != "rw" {
		t.Errorf("bind remount: options %q super %q", m.Options, m.VFSOptions)
	}
	if err := tree.Mount("", "/", "", Rec|Shared, ""); err != nil {
		t.Fatal(err)
	}
	for mp, m := range mountsOf(t, tree) {
		if !strings.Contains(m.Optional, "shared:") {
			t.Errorf("%s not shared after rshared /: %q", mp, m.Optional)
		}
	}
	if got := mountsOf(t, tree)["/"].Optional; got != "shared:7 master:1" {
		t.Errorf("root optional = %q", got)
	}
	if err := tree.Mount("", "/sys/fs/cgroup", "", Rec|Private, ""); err != nil {
		t.Fatal(err)
	}
	for _, mp := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/pids"} {
		if got := mountsOf(t, tree)[mp].Optional; got != "" {
			t.Errorf("%s optional after rprivate = %q", mp, got)
		}
	}
	if got := mountsOf(t, tree)["/sys"].Optional; got == "" {
		t.Error("rprivate of /sys/fs/cgroup changed /sys")
	}

	// A file bind is followed when reading, and is a mount point.
	if err := tree.Mount("/kind/fake", "/proc/cgroups", "", Bind, ""); err != nil {
		t.Fatal(err)
	}
	if b, _ := tree.ReadFile("/proc/cgroups", LimitTable); string(b) != "fake\n" {
		t.Errorf("read through bind = %q", b)
	}
	bound := mountsOf(t, tree)["/proc/cgroups"]
	if bound == nil || bound.FSType != "zfs" || bound.Root != "/fake" {
		t.Errorf("bind entry = %+v", bound)
	}
	if err := tree.Unmount("/proc/cgroups", 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := tree.ReadFile("/proc/cgroups", LimitTable); !strings.HasPrefix(string(b), "#subsys_name") {
		t.Errorf("after umount = %q", b)
	}
	err := tree.Unmount("/proc/cgroups", 0)
	var me *MountError
	if !errors.As(err, &me) || !errors.Is(err, unix.EINVAL) {
		t.Errorf("umount of a non-mount = %v", err)
	}

	// A plain remount changes the superblock.
	if err := tree.Mount("", "/kind", "", Remount|ReadOnly, ""); err != nil {
		t.Fatal(err)
	}
	if m := mountsOf(t, tree)["/kind"]; m.VFSOptions != "ro" || m.Options != "ro" {
		t.Errorf("plain remount: %q %q", m.Options, m.VFSOptions)
	}
	// The escaped mount point survives rewriting.
	if mountsOf(t, tree)["/with space"] == nil {
		t.Error("lost the mount point with a space")
	}
	want := []string{
		"mount none on /sys (remount,bind,ro,nosuid,nodev,noexec,relatime)",
		"mount none on / (rec,shared)",
		"mount none on /sys/fs/cgroup (rec,private)",
		"mount /kind/fake on /proc/cgroups (bind)",
		"umount /proc/cgroups",
		"mount none on /kind (remount,ro)",
	}
	if diff := cmp.Diff(want, tree.Changes()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

func TestTreeWrites(t *testing.T) {
	tree := newTestTree(t)
	// rename(2) over a bind-mounted file fails as in the kernel.
	if err := tree.WriteFile("/etc/resolv.conf", []byte("x"), 0o644); !errors.Is(err, unix.EBUSY) {
		t.Errorf("atomic write over a mount point = %v, want EBUSY", err)
	}
	if err := tree.WriteFileInPlace("/etc/resolv.conf", []byte("nameserver 10.0.0.1\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := tree.ReadFile("/etc/resolv.conf", LimitTable); string(b) != "nameserver 10.0.0.1\n" {
		t.Errorf("in place = %q", b)
	}
	// An injected failure between the temp file and the rename leaves the
	// old content and no temp file behind.
	if err := tree.WriteFile("/kind/fake", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree.Fail = func(op, p string) error {
		if op == "rename" {
			return errors.New("crash")
		}
		return nil
	}
	if err := tree.WriteFile("/kind/fake", []byte("newer"), 0o644); err == nil {
		t.Fatal("injected failure not returned")
	}
	if b, _ := tree.ReadFile("/kind/fake", LimitTable); string(b) != "new" {
		t.Errorf("after failed write = %q", b)
	}
	entries, _ := os.ReadDir(tree.Path("/kind"))
	if len(entries) != 1 {
		t.Errorf("temp files left: %v", entries)
	}
	// Paths cannot leave the root.
	if got, want := tree.Path("/../../etc/passwd"), filepath.Join(tree.Root, "etc/passwd"); got != want {
		t.Errorf("Path escaped: %s", got)
	}
	if _, err := tree.ReadFile("/nope", LimitTable); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), " /nope") {
		t.Errorf("error names the tree path: %v", err)
	}
}

func TestTreeProbes(t *testing.T) {
	tree := newTestTree(t)
	ctx := context.Background()
	if got, _ := tree.FSType("/kind"); got != "zfs" {
		t.Errorf("FSType from mountinfo = %q", got)
	}
	if got, _ := tree.FSType("/etc"); got != "overlayfs" {
		t.Errorf("FSType / = %q", got)
	}
	if _, err := tree.FSType("/kind/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("FSType of a missing path = %v, want ErrNotExist as statfs(2)", err)
	}
	if n, _ := tree.NofileHard(); n != 1<<20 {
		t.Errorf("default nofile = %d", n)
	}
	if err := tree.OverlayTrial(); err != nil {
		t.Errorf("default overlay = %v", err)
	}
	probe := filepath.Join(tree.Root, ProbeDir)
	os.MkdirAll(filepath.Join(probe, "run"), 0o755)
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(probe, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("statfs", "/kind fuseblk\n")
	write("nofile", "1024\n")
	write("overlay", "mount: permission denied\n")
	write("hosts", "node 172.18.0.2 fc00::2\nslow hang\n")
	write("environ", "A=1\nB=\nC=x=y\n")
	write("run/iptables-nft-save", "-A X\n")
	write("run/iptables-legacy-save.hang", "")
	write("run/kubeadm.fail", "certs: boom\n")

	if got, _ := tree.FSType("/kind"); got != "fuseblk" {
		t.Errorf("FSType override = %q", got)
	}
	if n, _ := tree.NofileHard(); n != 1024 {
		t.Errorf("nofile = %d", n)
	}
	if err := tree.OverlayTrial(); err == nil || err.Error() != "mount: permission denied" {
		t.Errorf("overlay = %v", err)
	}
	if a, err := tree.LookupIP(ctx, "ip4", "node"); err != nil || len(a) != 1 || a[0].String() != "172.18.0.2" {
		t.Errorf("ip4 = %v %v", a, err)
	}
	if a, _ := tree.LookupIP(ctx, "ip6", "node"); len(a) != 1 || a[0].String() != "fc00::2" {
		t.Errorf("ip6 = %v", a)
	}
	if _, err := tree.LookupIP(ctx, "ip4", "other"); err == nil {
		t.Error("unknown name resolved")
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := tree.LookupIP(tctx, "ip4", "slow"); err == nil {
		t.Error("hanging lookup returned")
	}
	if out, _, err := tree.Run(ctx, []string{"/usr/sbin/iptables-nft-save"}, nil, time.Second); err != nil || string(out) != "-A X\n" {
		t.Errorf("run = %q %v", out, err)
	}
	start := time.Now()
	if _, _, err := tree.Run(ctx, []string{"iptables-legacy-save"}, nil, 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("hang = %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Error("hang did not time out")
	}
	if _, _, err := tree.Run(ctx, []string{"kubeadm"}, nil, time.Second); err == nil || !strings.Contains(err.Error(), "certs: boom") {
		t.Errorf("fail = %v", err)
	}
	if _, _, err := tree.Run(ctx, []string{"sh"}, nil, time.Second); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing command = %v", err)
	}
	env, err := tree.Environ()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"A": "1", "B": "", "C": "x=y"} {
		if v, ok := env(k); !ok || v != want {
			t.Errorf("env %s = %q %v", k, v, ok)
		}
	}
	if _, ok := env("D"); ok {
		t.Error("unset variable found")
	}
	if got := len(tree.Ran()); got != 4 {
		t.Errorf("ran %d commands", got)
	}
}

func TestMountFlags(t *testing.T) {
	if got := (Remount | Bind | ReadOnly | NoSuid | MountFlags(1<<30)).String(); got != "remount,bind,ro,nosuid,0x40000000" {
		t.Errorf("String = %q", got)
	}
	if got := MountFlags(0).String(); got != "none" {
		t.Errorf("zero = %q", got)
	}
	f := FlagsFromOptions("rw,nosuid,nodev,noexec,relatime")
	if f != NoSuid|NoDev|NoExec|RelAtime {
		t.Errorf("FlagsFromOptions = %s", f)
	}
	if got := OptionsFromFlags(f | ReadOnly); got != "ro,nosuid,nodev,noexec,relatime" {
		t.Errorf("OptionsFromFlags = %q", got)
	}
	// Every per-mount option the kernel prints (show_mnt_opts) round-trips.
	const all = "ro,nosuid,nodev,noexec,noatime,nodiratime,relatime,nosymfollow"
	if got := OptionsFromFlags(FlagsFromOptions(all)); got != all {
		t.Errorf("OptionsFromFlags(FlagsFromOptions(%q)) = %q", all, got)
	}
	if got := FlagsFromOptions("rw,nosymfollow").String(); got != "nosymfollow" {
		t.Errorf("nosymfollow prints %q", got)
	}
}

func TestFSTypeName(t *testing.T) {
	for magic, want := range map[int64]string{0x2fc12fc1: "zfs", unix.FUSE_SUPER_MAGIC: "fuseblk", 0x61756673: "aufs", 0x12345: "UNKNOWN (0x12345)"} {
		if got := FSTypeName(magic); got != want {
			t.Errorf("FSTypeName(%#x) = %q, want %q", magic, got, want)
		}
	}
	for in, want := range map[string]string{"overlay": "overlayfs", "ext4": "ext2/ext3", "fuse.sshfs": "fuseblk", "zfs": "zfs"} {
		if got := FSTypeFromMountinfo(in); got != want {
			t.Errorf("FSTypeFromMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFormatMountinfoRoundTrip(t *testing.T) {
	mi, err := mountinfo.GetMountsFromReader(strings.NewReader(sampleMountinfo), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range mi {
		b.WriteString(FormatMountinfo(m) + "\n")
	}
	if diff := cmp.Diff(sampleMountinfo, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestParseEnviron: the newline form of .host/environ reads a CRLF file
// (written on another system) as its lines, as every table of a host is
// read; the NUL form keeps each value byte for byte, a CR included.
func TestParseEnviron(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]string
	}{
		{"A=1\nB=x y\n", map[string]string{"A": "1", "B": "x y"}},
		{"A=1\r\nB=x y\r\nC=\r\n", map[string]string{"A": "1", "B": "x y", "C": ""}},
		{"A=1\r\x00B=\r\n\x00", map[string]string{"A": "1\r", "B": "\r\n"}},
	} {
		if diff := cmp.Diff(c.want, ParseEnviron([]byte(c.in))); diff != "" {
			t.Errorf("ParseEnviron(%q) (-want +got):\n%s", c.in, diff)
		}
	}
}
