package system_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

const (
	rootLine = "1042 975 0:94 / / rw,relatime master:482 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w"
	sysLine  = "1046 1042 0:99 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw"
	varLine  = "1064 1042 254:0 /volumes/x/_data /var rw,relatime master:1 - ext4 /dev/vda rw"
)

func TestAllShared(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  bool
	}{
		{"fresh Docker node: slaves", []string{rootLine, sysLine, varLine}, false},
		{"everything shared", []string{
			"1 0 0:94 / / rw,relatime shared:1 master:482 - overlay overlay rw",
			"2 1 0:99 / /sys rw,nosuid shared:2 - sysfs sysfs rw",
			"3 1 254:0 /v /var rw,relatime shared:3 master:1 - ext4 /dev/vda rw",
		}, true},
		{"/ shared over a slave /var", []string{
			"1 0 0:94 / / rw,relatime shared:1 - overlay overlay rw",
			"3 1 254:0 /v /var rw,relatime master:1 - ext4 /dev/vda rw",
		}, false},
		{"cgroup mounts made private by fix_cgroup do not count", []string{
			"1 0 0:94 / / rw,relatime shared:1 - overlay overlay rw",
			"2 1 0:40 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw",
			"3 2 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory",
			"4 3 0:26 /kubelet /sys/fs/cgroup/memory/kubelet rw,nosuid - cgroup cgroup rw,memory",
		}, true},
		{"/sys/fs/cgroupfoo is not under /sys/fs/cgroup", []string{
			"1 0 0:94 / / rw,relatime shared:1 - overlay overlay rw",
			"2 1 0:40 / /sys/fs/cgroupfoo rw,nosuid - tmpfs tmpfs rw",
		}, false},
		{"no / at all", []string{"2 1 0:99 / /sys rw,nosuid shared:2 - sysfs sysfs rw"}, false},
	}
	for _, tt := range tests {
		if got := system.AllShared(hosttest.Mounts(t, tt.lines...), "/sys/fs/cgroup"); got != tt.want {
			t.Errorf("%s: system.AllShared = %t, want %t", tt.name, got, tt.want)
		}
	}
}

func TestIsShared(t *testing.T) {
	for optional, want := range map[string]bool{
		"":                    false,
		"master:1":            false,
		"shared:12":           true,
		"shared:12 master:1":  true,
		"master:1 shared:12":  true,
		"propagate_from:3":    false,
		"unbindable":          false,
		"sharedx:1 master:12": false,
	} {
		if got := system.IsShared(&mountinfo.Info{Optional: optional}); got != want {
			t.Errorf("IsShared(%q) = %t, want %t", optional, got, want)
		}
	}
}

func TestTop(t *testing.T) {
	mi := hosttest.Mounts(t, rootLine, sysLine, "1100 1046 0:99 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs rw")
	if got := system.Top(mi, "/sys"); got == nil || got.ID != 1100 {
		t.Errorf("Top(/sys) = %+v, want the last mount there (1100)", got)
	}
	if got := system.Top(mi, "/proc"); got != nil {
		t.Errorf("Top(/proc) = %+v, want nil", got)
	}
	if !system.IsReadOnly(system.Top(mi, "/sys")) || system.IsReadOnly(mi[1]) {
		t.Error("IsReadOnly: want the ro mount read-only and the rw one not")
	}
}

// TestMountTable: a MountTable parses the mount table once per content: the same
// slice while the file is unchanged, a new parse once it changed (as after
// fix_mount), and a nil MountTable parses every time;
// a Fixed one (a dry run's) reads the file once, its error included.
func TestMountTable(t *testing.T) {
	dir := hosttest.Dir(t, map[string]string{system.MountinfoPath: "1 0 0:1 / / rw - overlay overlay rw\n"})
	tr := system.NewTree(dir)
	var tbl system.MountTable
	a, err := tbl.Read(tr)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tbl.Read(tr)
	if err != nil || &a[0] != &b[0] {
		t.Fatalf("unchanged table parsed again (%v)", err)
	}
	if err := hosttest.Files(t, tr).WriteFile("/proc/self/mountinfo", []byte("1 0 0:1 / / rw shared:1 - overlay overlay rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := tbl.Read(tr)
	if err != nil || &c[0] == &a[0] || c[0].Optional != "shared:1" {
		t.Fatalf("changed table: %+v, %v", c[0], err)
	}
	var none *system.MountTable
	d, err := none.Read(tr)
	if err != nil || &d[0] == &c[0] || d[0].Optional != "shared:1" {
		t.Fatalf("nil table: %+v, %v", d[0], err)
	}
	if err := hosttest.Files(t, tr).WriteFile("/proc/self/mountinfo", []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Read(tr); err == nil || !strings.Contains(err.Error(), "/proc/self/mountinfo") {
		t.Errorf("garbage: %v", err)
	}

	fixed := system.MountTable{Fixed: true}
	if _, err := fixed.Read(tr); err == nil {
		t.Fatal("garbage read without an error")
	}
	if err := hosttest.Files(t, tr).WriteFile("/proc/self/mountinfo", []byte("1 0 0:1 / / rw - overlay overlay rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if mi, err := fixed.Read(tr); err == nil || mi != nil {
		t.Errorf("a fixed table read again: %v, %v", mi, err)
	}
	if mi, err := tbl.Read(tr); err != nil || len(mi) != 1 {
		t.Errorf("a table that is not fixed did not read again: %v, %v", mi, err)
	}
}

// TestParseMountinfoBlankLines: blank lines anywhere in a table (a fake
// tree's trailing newline, CRLF, a line of blanks) are skipped, as the
// other table parsers skip them; a bad line after them is still named by
// its own number.
func TestParseMountinfoBlankLines(t *testing.T) {
	want := hosttest.Mounts(t, rootLine, sysLine, varLine)
	for _, table := range []string{
		"\n" + rootLine + "\n" + sysLine + "\n" + varLine + "\n",
		rootLine + "\n\n" + sysLine + "\n" + varLine + "\n\n\n",
		rootLine + "\r\n\r\n" + sysLine + "\r\n" + varLine,
		rootLine + "\n \t \n" + sysLine + "\n" + varLine + "\n   ",
	} {
		got, err := system.ParseMountinfo([]byte(table))
		if err != nil {
			t.Errorf("ParseMountinfo(%q): %v", table, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseMountinfo(%q) (-want +got):\n%s", table, diff)
		}
	}
	_, err := system.ParseMountinfo([]byte("\n" + rootLine + "\n\nbroken line\n"))
	if err == nil || !strings.HasPrefix(err.Error(), `line 4: "broken line"`) {
		t.Errorf("error %v, want one naming line 4", err)
	}
	if _, err := system.ParseMountinfo([]byte("\n \n")); err == nil || err.Error() != "no mounts" {
		t.Errorf("a table of blank lines: error %v, want no mounts", err)
	}
}

// TestParseMountinfoRootAboveNamespace: in a cgroup namespace the kernel
// shows the root of a cgroup mount outside the namespace's cgroup relative
// to it, with leading ".." (cgroup_show_path): real tables, which must
// parse. Any other unclean root, and any unclean mount point, is a forged
// table.
func TestParseMountinfoRootAboveNamespace(t *testing.T) {
	for _, root := range []string{"/..", "/../..", "/../../docker/abc"} {
		line := "35 30 0:30 " + root + " /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory"
		mi, err := system.ParseMountinfo([]byte(rootLine + "\n" + line + "\n"))
		if err != nil {
			t.Errorf("root %s: %v", root, err)
			continue
		}
		if mi[1].Root != root {
			t.Errorf("root %s read as %s", root, mi[1].Root)
		}
	}
	for _, line := range []string{
		"35 30 0:30 /../x/../y /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory",
		"35 30 0:30 /x/.. /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory",
		"35 30 0:30 /.../x /sys/fs/cgroup/memory/.. rw - cgroup cgroup rw,memory",
		"35 30 0:30 / /.. rw - cgroup cgroup rw,memory",
	} {
		if _, err := system.ParseMountinfo([]byte(rootLine + "\n" + line + "\n")); err == nil || !strings.Contains(err.Error(), "not a clean absolute path") {
			t.Errorf("%q: error %v, want one saying it is not a clean absolute path", line, err)
		}
	}
}
