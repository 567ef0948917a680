package mounts

import (
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

const (
	rootLine = "1042 975 0:94 / / rw,relatime master:482 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w"
	sysLine  = "1046 1042 0:99 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw"
	sysRO    = "1046 1042 0:99 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs rw"
	varLine  = "1064 1042 254:0 /volumes/x/_data /var rw,relatime master:1 - ext4 /dev/vda rw"

	setuidRoot = fs.ModeSetuid | 0o755
)

var (
	intro     = plan.Info("ensuring we can execute mount/umount even with userns-remap")
	remountLn = plan.Info("remounting /sys read-only")
	sharedLn  = plan.Info("making mounts shared")
	rshared   = plan.Mount("", "/", "", system.Rec|system.Shared, "").Because("mount propagation for the kubelet's volumes").OnEveryBoot()
	emptyNil  = cmpopts.EquateEmpty()
)

func sysRemount(flags system.MountFlags) plan.Action {
	return plan.Mount("", "/sys", "", flags, "").
		Because("systemd expects a read-only /sys in a container").
		ToleratedInUserNS("UserNS: ignoring mount fail")
}

const sysFlags = system.Remount | system.Bind | system.ReadOnly | system.NoSuid | system.NoDev | system.NoExec | system.RelAtime

func bin(name string, uid, gid int, mode fs.FileMode, fstype string) Binary {
	return Binary{Name: name, Path: "/usr/bin/" + name, UID: uid, GID: gid, Mode: mode, FSType: fstype}
}

func TestPlan(t *testing.T) {
	sys := hosttest.Mounts(t, sysLine)[0]
	ro := hosttest.Mounts(t, sysRO)[0]
	tests := []struct {
		name string
		f    Facts
		want []plan.Action
	}{
		{
			name: "image as built: setuid root binaries, rw /sys, / not shared",
			f: Facts{
				Mount: bin("mount", 0, 0, setuidRoot, "overlayfs"), Umount: bin("umount", 0, 0, setuidRoot, "overlayfs"),
				Sys: sys,
			},
			want: []plan.Action{
				intro,
				plan.Chmod("/usr/bin/mount", 0o755), plan.Chmod("/usr/bin/umount", 0o755),
				remountLn, sysRemount(sysFlags),
				sharedLn, rshared,
			},
		},
		{
			name: "userns-remap: owned by the remapped root",
			f: Facts{
				Mount: bin("mount", 165536, 165536, setuidRoot, "overlayfs"), Umount: bin("umount", 165536, 165536, setuidRoot, "overlayfs"),
				Sys: sys,
			},
			want: []plan.Action{
				intro,
				plan.Chown("/usr/bin/mount", 0, 0), plan.Chmod("/usr/bin/mount", 0o755),
				plan.Chown("/usr/bin/umount", 0, 0), plan.Chmod("/usr/bin/umount", 0o755),
				remountLn, sysRemount(sysFlags),
				sharedLn, rshared,
			},
		},
		{
			name: "owner unmapped in the user namespace (65534), group root, setgid only",
			f: Facts{
				Mount: bin("mount", 65534, 0, fs.ModeSetgid|0o755, "overlayfs"), Umount: bin("umount", 0, 65534, 0o755, "overlayfs"),
				Sys: ro,
			},
			want: []plan.Action{
				intro,
				plan.Chown("/usr/bin/mount", 0, 0), plan.Chmod("/usr/bin/mount", 0o755),
				plan.Chown("/usr/bin/umount", 0, 0),
				remountLn, sharedLn, rshared,
			},
		},
		{
			name: "sticky and odd permission bits kept",
			f: Facts{
				Mount: bin("mount", 0, 0, fs.ModeSetuid|fs.ModeSticky|0o750, "ext2/ext3"), Umount: bin("umount", 0, 0, 0o700, "ext2/ext3"),
				Sys: ro,
			},
			want: []plan.Action{
				intro, plan.Chmod("/usr/bin/mount", fs.ModeSticky|0o750),
				remountLn, sharedLn, rshared,
			},
		},
		{
			name: "already fixed: logs, and / made rshared as on every boot",
			f: Facts{
				Mount: bin("mount", 0, 0, 0o755, "overlayfs"), Umount: bin("umount", 0, 0, 0o755, "overlayfs"),
				Sys: ro,
			},
			want: []plan.Action{intro, remountLn, sharedLn, rshared},
		},
		{
			name: "aufs: sync on every boot",
			f: Facts{
				Mount: bin("mount", 0, 0, 0o755, "aufs"), Umount: bin("umount", 0, 0, 0o755, "aufs"),
				Sys: sys,
			},
			want: []plan.Action{
				intro,
				plan.Info("detected aufs, calling sync"), plan.Sync().OnEveryBoot(),
				remountLn, sysRemount(sysFlags),
				sharedLn, rshared,
			},
		},
		{
			name: "umount on aufs does not matter, mount's filesystem does",
			f: Facts{
				Mount: bin("mount", 0, 0, 0o755, "overlayfs"), Umount: bin("umount", 0, 0, 0o755, "aufs"),
				Sys: ro,
			},
			want: []plan.Action{intro, remountLn, sharedLn, rshared},
		},
		{
			name: "mount missing on PATH",
			f: Facts{
				Mount: Binary{Name: "mount"}, Umount: bin("umount", 0, 0, setuidRoot, "overlayfs"),
				Sys: sys,
			},
			want: []plan.Action{
				intro,
				plan.Warning("mount not found on PATH; leaving it as it is"),
				plan.Chmod("/usr/bin/umount", 0o755),
				remountLn, sysRemount(sysFlags),
				sharedLn, rshared,
			},
		},
		{
			name: "nothing mounted at /sys",
			f: Facts{
				Mount: bin("mount", 0, 0, 0o755, "overlayfs"), Umount: bin("umount", 0, 0, 0o755, "overlayfs"),
			},
			want: []plan.Action{
				intro,
				remountLn, plan.Warning("nothing is mounted at /sys; not remounting it"),
				sharedLn, rshared,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Plan(tt.f), emptyNil); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSysReadOnly(t *testing.T) {
	tests := []struct {
		line string
		want system.MountFlags
	}{
		// Docker --privileged: the flags a remount must repeat.
		{sysLine, sysFlags},
		{"1 0 0:5 / /sys rw,relatime - sysfs sysfs rw", system.Remount | system.Bind | system.ReadOnly | system.RelAtime},
		{"1 0 0:5 / /sys rw,nosuid,nodev,noexec,noatime - sysfs sysfs rw", system.Remount | system.Bind | system.ReadOnly | system.NoSuid | system.NoDev | system.NoExec | system.NoAtime},
		{"1 0 0:5 / /sys rw,nosuid,nodev,noexec,strictatime,nodiratime - sysfs sysfs rw", system.Remount | system.Bind | system.ReadOnly | system.NoSuid | system.NoDev | system.NoExec | system.StrictAt | system.NoDirAt},
		{"1 0 0:5 / /sys rw - sysfs sysfs rw", system.Remount | system.Bind | system.ReadOnly},
		// Linux 5.10's per-mount nosymfollow (MS_NOSYMFOLLOW): a remount
		// without it clears it.
		{"1 0 0:5 / /sys rw,nosuid,nosymfollow - sysfs sysfs rw", system.Remount | system.Bind | system.ReadOnly | system.NoSuid | system.NoSymFol},
		// Superblock options (after " - ") are not per-mount flags.
		{"1 0 0:5 / /sys rw,relatime - sysfs sysfs ro,nosuid", system.Remount | system.Bind | system.ReadOnly | system.RelAtime},
	}
	for _, tt := range tests {
		m := hosttest.Mounts(t, tt.line)[0]
		got := SysReadOnly(m)
		want := sysRemount(tt.want)
		if diff := cmp.Diff(want, got, emptyNil); diff != "" {
			t.Errorf("SysReadOnly(%q) (-want +got):\n%s", tt.line, diff)
		}
		if got.Flags.String() != tt.want.String() {
			t.Errorf("flags print %q, want %q", got.Flags, tt.want)
		}
	}
	// The rendering a dry run shows for Docker's /sys.
	const want = "mount none on /sys (remount,bind,ro,nosuid,nodev,noexec,relatime) [on failure: tolerated-in-userns \"UserNS: ignoring mount fail\"]  # systemd expects a read-only /sys in a container"
	if got := SysReadOnly(hosttest.Mounts(t, sysLine)[0]).String(); got != want {
		t.Errorf("rendered\n %s\nwant\n %s", got, want)
	}
}

// tree lays out files (mode per path) and a mount table under a temp dir.
func tree(t *testing.T, files map[string]fs.FileMode, mountinfo string, extra map[string]string) *system.Tree {
	t.Helper()
	dir := t.TempDir()
	tr := system.NewTree(dir)
	w := hosttest.Files(t, tr)
	write := func(p, content string, mode fs.FileMode) {
		if err := w.MkdirAll(path.Dir(path.Clean("/"+p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if mode.IsDir() {
			if err := w.MkdirAll(p, mode.Perm()); err != nil {
				t.Fatal(err)
			}
			return
		}
		m := mode.Perm()
		if mode&fs.ModeSetuid != 0 {
			m |= os.ModeSetuid
		}
		if err := w.WriteFile(p, []byte(content), m); err != nil {
			t.Fatal(err)
		}
	}
	for p, mode := range files {
		write(p, "#!/bin/true\n", mode)
	}
	for p, content := range extra {
		write(p, content, 0o644)
	}
	write("proc/self/mountinfo", mountinfo, 0o444)
	return tr
}

func TestDetect(t *testing.T) {
	mi := strings.Join([]string{rootLine, sysLine, varLine}, "\n") + "\n"
	tests := []struct {
		name       string
		files      map[string]fs.FileMode
		extra      map[string]string
		searchPath string
		wantMount  Binary
		wantUmount Binary
	}{
		{
			name:       "Debian image, default PATH",
			files:      map[string]fs.FileMode{"usr/bin/mount": setuidRoot, "usr/bin/umount": setuidRoot},
			wantMount:  bin("mount", 0, 0, setuidRoot, "overlayfs"),
			wantUmount: bin("umount", 0, 0, setuidRoot, "overlayfs"),
		},
		{
			name: "PATH order; directories, non-executables and relative entries skipped",
			files: map[string]fs.FileMode{
				"usr/local/sbin/mount": fs.ModeDir | 0o755,
				"usr/sbin/mount":       0o644,
				"cwd/mount":            0o755,
				"sbin/mount":           0o755,
				"usr/bin/mount":        setuidRoot,
				"usr/bin/umount":       setuidRoot,
			},
			searchPath: "/usr/local/sbin:cwd:/usr/sbin:/sbin:/usr/bin",
			wantMount:  Binary{Name: "mount", Path: "/sbin/mount", Mode: 0o755, FSType: "overlayfs"},
			wantUmount: bin("umount", 0, 0, setuidRoot, "overlayfs"),
		},
		{
			name:       "statfs answers for aufs",
			files:      map[string]fs.FileMode{"usr/bin/mount": setuidRoot, "usr/bin/umount": setuidRoot},
			extra:      map[string]string{".host/statfs": "/ aufs\n"},
			wantMount:  bin("mount", 0, 0, setuidRoot, "aufs"),
			wantUmount: bin("umount", 0, 0, setuidRoot, "aufs"),
		},
		{
			name:       "none on PATH",
			files:      map[string]fs.FileMode{"opt/mount": 0o755},
			searchPath: "/usr/bin:/bin",
			wantMount:  Binary{Name: "mount"},
			wantUmount: Binary{Name: "umount"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := tree(t, tt.files, mi, tt.extra)
			f, err := Detect(tr, tt.searchPath, nil)
			if err != nil {
				t.Fatal(err)
			}
			uid := os.Geteuid()
			for _, b := range []*Binary{&tt.wantMount, &tt.wantUmount} {
				if b.Path != "" {
					// Files a test creates belong to whoever runs it.
					b.UID, b.GID = uid, os.Getegid()
				}
			}
			if diff := cmp.Diff(tt.wantMount, f.Mount); diff != "" {
				t.Errorf("mount (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantUmount, f.Umount); diff != "" {
				t.Errorf("umount (-want +got):\n%s", diff)
			}
			if f.Sys == nil || f.Sys.Options != "rw,nosuid,nodev,noexec,relatime" {
				t.Errorf("Sys %+v; want Docker's /sys", f.Sys)
			}
		})
	}
}

// TestRootSharedEveryBoot: as the script, "/" is made recursively shared
// on every boot, whatever is shared already. A mount table where all but
// /sys/fs/cgroup is shared (a cgroup v2 node whose runtime shares "/")
// must still get it: skipping it left /sys/fs/cgroup private on v2.
func TestRootSharedEveryBoot(t *testing.T) {
	for name, lines := range map[string][]string{
		"/ shared over a slave /var": {
			"1 0 0:94 / / rw,relatime shared:1 master:482 - overlay overlay rw",
			"3 1 254:0 /v /var rw,relatime master:1 - ext4 /dev/vda rw",
		},
		"all shared but a private /sys/fs/cgroup (v2)": {
			"1 0 0:94 / / rw,relatime shared:1 master:482 - overlay overlay rw",
			"3 1 254:0 /v /var rw,relatime shared:2 master:1 - ext4 /dev/vda rw",
			"4 1 0:40 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw",
		},
		"all shared": {
			"1 0 0:94 / / rw,relatime shared:1 master:482 - overlay overlay rw",
			"3 1 254:0 /v /var rw,relatime shared:2 master:1 - ext4 /dev/vda rw",
		},
	} {
		f, err := Detect(tree(t, nil, strings.Join(lines, "\n")+"\n", nil), "/nowhere", nil)
		if err != nil {
			t.Fatal(err)
		}
		got := Plan(f)
		i := slices.IndexFunc(got, func(a plan.Action) bool { return cmp.Equal(a, sharedLn, emptyNil) })
		if i < 0 || i+1 == len(got) || !cmp.Equal(got[i+1], rshared, emptyNil) {
			t.Errorf("%s: want %q then %s; got %q", name, sharedLn, rshared, got)
		}
	}
}

func TestDetectOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another owner needs root")
	}
	tr := tree(t, map[string]fs.FileMode{"usr/bin/mount": setuidRoot, "usr/bin/umount": setuidRoot}, rootLine+"\n", nil)
	if err := hosttest.Files(t, tr).Lchown("/usr/bin/mount", 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// chown clears the setuid bit; the image had it and the owner.
	if err := hosttest.Files(t, tr).Chmod("/usr/bin/mount", os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	f, err := Detect(tr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bin("mount", 65534, 65534, setuidRoot, "overlayfs"), f.Mount); diff != "" {
		t.Errorf("mount (-want +got):\n%s", diff)
	}
	want := []plan.Action{
		intro,
		plan.Chown("/usr/bin/mount", 0, 0), plan.Chmod("/usr/bin/mount", 0o755),
		plan.Chmod("/usr/bin/umount", 0o755),
		remountLn, plan.Warning("nothing is mounted at /sys; not remounting it"),
		sharedLn, rshared,
	}
	if diff := cmp.Diff(want, Plan(f), emptyNil); diff != "" {
		t.Errorf("Plan (-want +got):\n%s", diff)
	}
}

func TestDetectErrors(t *testing.T) {
	// No binaries: the Tree's statfs answer would read mountinfo first.
	tr := tree(t, nil, "garbage\n", nil)
	if _, err := Detect(tr, "", nil); err == nil || !strings.Contains(err.Error(), "/proc/self/mountinfo") {
		t.Errorf("Detect with a garbage mountinfo: %v, want an error naming /proc/self/mountinfo", err)
	}
	if err := hosttest.Files(t, tr).Remove("/proc/self/mountinfo"); err != nil {
		t.Fatal(err)
	}
	if _, err := Detect(tr, "", nil); err == nil || err.Error() != "open /proc/self/mountinfo: no such file or directory" {
		t.Errorf("Detect without mountinfo: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	f := Facts{Mount: bin("mount", 0, 0, setuidRoot, "overlayfs"), Umount: Binary{Name: "umount"}}
	const want = "/usr/bin/mount 0:0 urwxr-xr-x on overlayfs, umount not found"
	if got := f.Describe(); got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

// TestReadMountinfoErrors: an unusable mount table is an error naming the
// file and the line, quoting (clipped, escaped) what is wrong with it.
func TestReadMountinfoErrors(t *testing.T) {
	long := "1 0 0:1 / /" + strings.Repeat("x", 70000) + " rw - tmpfs tmpfs rw"
	for _, tt := range []struct {
		name, mountinfo, want string
	}{
		{"empty", "", "/proc/self/mountinfo: no mounts"},
		{"only blank lines", "\n\n", "/proc/self/mountinfo: no mounts"},
		{"truncated last line", rootLine + "\n" + sysLine + "\n" + "1069 1044 0:93 / /dev/shm rw,nosuid - tmpfs",
			`/proc/self/mountinfo: line 3: "1069 1044 0:93 / /dev/shm rw,nosuid - tmpfs": not enough fields (8)`},
		{"binary", rootLine + "\n\x00\xff\x1b[2J garbage\n",
			`/proc/self/mountinfo: line 2: "\x00\xff\x1b[2J garbage": not enough fields (2)`},
		{"control characters in a field", rootLine + "\n1 0 \x1b[2J / / rw - tmpfs tmpfs rw\n",
			`/proc/self/mountinfo: line 2: "1 0 \x1b[2J / / rw - tmpfs tmpfs rw": unexpected major:minor pair \x1b[2J`},
		{"long line", rootLine + "\n" + long + "\n",
			"/proc/self/mountinfo: line 2: longer than 65536 bytes"},
		{"long garbage", rootLine + "\n" + strings.Repeat("garbage ", 40) + "\n",
			`/proc/self/mountinfo: line 2: "garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage "...: missing - separator`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := system.ReadMountinfo(tree(t, nil, tt.mountinfo, nil))
			if err == nil || err.Error() != tt.want {
				t.Errorf("ReadMountinfo: %v\nwant %s", err, tt.want)
			}
		})
	}
}
