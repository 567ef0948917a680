package cgroupfix

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// emptyIsNil: the plan constructors leave some []byte fields empty rather
// than nil; what matters is the content.
var emptyIsNil = cmpopts.EquateEmpty()

var cpuCgroupTests = []struct {
	name, in string
	want     string
	wantErr  string
}{
	{name: "docker cgroupns", in: "12:misc:/\n2:cpu,cpuacct:/\n1:name=systemd:/\n0::/\n", want: "/"},
	{name: "docker no cgroupns", in: "3:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/docker/abc\n", want: "/docker/abc"},
	{name: "cpuacct,cpu order", in: "2:cpuacct,cpu:/kubepods/pod1/c1\n", want: "/kubepods/pod1/c1"},
	{name: "cpu alone, cpuacct apart (WSL2)", in: "3:cpuacct:/a\n2:cpu:/b\n1:cpuset:/c\n", want: "/b"},
	{name: "cpu between others", in: "4:net_cls,cpu,cpuacct:/x\n", want: "/x"},
	{name: "name=systemd first", in: "1:name=systemd:/user.slice\n2:cpu,cpuacct:/system.slice/docker-1.scope\n", want: "/system.slice/docker-1.scope"},
	{name: "name=cpu is not cpu", in: "5:name=cpu:/named\n2:cpu:/real\n", want: "/real"},
	{name: "colons in path", in: "2:cpu,cpuacct:/a:b:c\n", want: "/a:b:c"},
	{name: "long relative path", in: "2:cpu:" + strings.Repeat("x", 60000) + "\n", wantErr: `line 1: cgroup path "` + strings.Repeat("x", 80) + `"... is not absolute`},
	{name: "CRLF", in: "2:cpu,cpuacct:/docker/abc\r\n1:name=systemd:/docker/abc\r\n", want: "/docker/abc"},
	{name: "no trailing newline", in: "2:cpu,cpuacct:/docker/abc", want: "/docker/abc"},
	{name: "blank lines", in: "\n\n2:cpu:/p\n\n", want: "/p"},
	{name: "first cpu line wins", in: "2:cpu:/first\n9:cpu:/second\n", want: "/first"},
	{name: "lines after cpu are not parsed", in: "2:cpu:/p\ngarbage\n", want: "/p"},
	{name: "empty", in: "", wantErr: "no cpu controller"},
	{name: "v2 only", in: "0::/\n", wantErr: "no cpu controller"},
	{name: "missing cpu line", in: "11:cpuset:/\n3:cpuacct:/\n1:name=systemd:/\n", wantErr: "no cpu controller"},
	{name: "garbage", in: "hello world\n", wantErr: "line 1: want id:controllers:path"},
	{name: "one colon", in: "2:cpu\n", wantErr: "line 1: want id:controllers:path"},
	// The library does not look at the id (the kernel always writes one).
	{name: "empty id", in: ":cpu:/x\n", want: "/x"},
	{name: "CR-only blank line", in: "\r\n2:cpu:/p\r\n", want: "/p"},
	{name: "dotdot", in: "2:cpu:/docker/../../etc\n", wantErr: `line 1: cgroup path "/docker/../../etc" is not a clean path inside the cgroup namespace`},
	{name: "outside the namespace", in: "2:cpu:/..\n", wantErr: `line 1: cgroup path "/.." is not a clean path inside the cgroup namespace`},
	// Longer than the library's line scanner takes: named, not quoted.
	{name: "64 KiB line", in: "1:name=systemd:/" + strings.Repeat("x", 64<<10) + "\n2:cpu:/p\n", wantErr: "line 1: longer than 65535 bytes"},
	{name: "64 KiB line after cpu", in: "2:cpu:/p\n1:name=systemd:/" + strings.Repeat("x", 64<<10) + "\n", want: "/p"},
	{name: "garbage before cpu", in: "2:cpu,cpuacct\n1:cpu:/x\n", wantErr: "line 1: want id:controllers:path"},
	{name: "relative path", in: "2:cpu:docker/abc\n", wantErr: `line 1: cgroup path "docker/abc" is not absolute`},
	{name: "empty path", in: "2:cpu,cpuacct:\n", wantErr: `line 1: cgroup path "" is not absolute`},
}

func TestSelfCgroupCPU(t *testing.T) {
	for _, tt := range cpuCgroupTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSelfCgroup([]byte(tt.in)).CPU()
			if gotErr := hosttest.ErrString(err); gotErr != tt.wantErr {
				t.Fatalf("CPU(%.80q) error = %q, want %q", tt.in, gotErr, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("CPU(%.80q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSelfCgroupUnified(t *testing.T) {
	for _, tt := range []struct {
		in          string
		onlyUnified bool
		unified     string
	}{
		{"0::/\n", true, "/"},
		{"0::/user.slice/user-1000.slice/user@1000.service/app.slice/node.scope\r\n\n", true, "/user.slice/user-1000.slice/user@1000.service/app.slice/node.scope"},
		{"2:cpu,cpuacct:/\n1:name=systemd:/\n0::/docker/x\n", false, "/docker/x"},
		{"2:cpu,cpuacct:/\n1:name=systemd:/\n", false, ""},
		{"", false, ""},
		{"\n\n", false, ""},
		{"garbage\n0::/\n", false, ""},
		{"0::/\ngarbage\n", false, "/"},
	} {
		s := ParseSelfCgroup([]byte(tt.in))
		if got := s.OnlyUnified(); got != tt.onlyUnified {
			t.Errorf("OnlyUnified(%q) = %t, want %t", tt.in, got, tt.onlyUnified)
		}
		if got := s.Unified(); got != tt.unified {
			t.Errorf("Unified(%q) = %q, want %q", tt.in, got, tt.unified)
		}
	}
}

const procCgroupsHeader = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"

var filterTests = []struct {
	name, in, want string
}{
	{
		name: "kernel format, misc last",
		in:   procCgroupsHeader + "cpuset\t9\t4\t1\ncpu\t2\t61\t1\nrdma\t11\t1\t1\nmisc\t12\t1\t1\n",
		want: procCgroupsHeader + "cpuset\t9\t4\t1\ncpu\t2\t61\t1\nrdma\t11\t1\t1\n",
	},
	{
		name: "misc in the middle",
		in:   procCgroupsHeader + "cpuset\t2\t4\t1\nmisc\t3\t1\t1\ncpu\t4\t71\t1\n",
		want: procCgroupsHeader + "cpuset\t2\t4\t1\ncpu\t4\t71\t1\n",
	},
	{
		name: "tabs expanded to spaces",
		in:   "#subsys_name    hierarchy       num_cgroups     enabled\ncpuset  2       4       1\nmisc    3       1       1\ncpu     4       71      1\n",
		want: "#subsys_name    hierarchy       num_cgroups     enabled\ncpuset  2       4       1\ncpu     4       71      1\n",
	},
	{
		name: "leading blanks",
		in:   "  misc 3 1 1\n\tcpu 4 71 1\n",
		want: "\tcpu 4 71 1\n",
	},
	{
		name: "CRLF",
		in:   "cpu\t2\t61\t1\r\nmisc\t12\t1\t1\r\npids\t7\t68\t1\r\n",
		want: "cpu\t2\t61\t1\r\npids\t7\t68\t1\r\n",
	},
	{
		name: "no trailing newline",
		in:   "cpu\t2\t61\t1\nmisc\t12\t1\t1",
		want: "cpu\t2\t61\t1\n",
	},
	{
		name: "a name that only contains misc stays",
		in:   "miscellaneous\t13\t1\t1\nmisc\t12\t1\t1\nmisc_extra\t14\t1\t1\n",
		want: "miscellaneous\t13\t1\t1\nmisc_extra\t14\t1\t1\n",
	},
	{
		name: "no misc: unchanged",
		in:   procCgroupsHeader + "cpu\t2\t61\t1\n",
		want: procCgroupsHeader + "cpu\t2\t61\t1\n",
	},
	{name: "misc only", in: "misc\t1\t1\t1\n", want: ""},
	{name: "blank lines kept", in: "\ncpu 1 1 1\n\n", want: "\ncpu 1 1 1\n\n"},
	{name: "empty", in: "", want: ""},
}

func TestFilterProcCgroups(t *testing.T) {
	for _, tt := range filterTests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(FilterProcCgroups([]byte(tt.in)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FilterProcCgroups(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

const (
	cid       = "/docker/0123abcd"
	tmpfsLine = "30 20 0:40 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755"
	// rprivate of /sys/fs/cgroup; self binds of kubelet roots.
	rprivate = "the kubelet roots' binds stay inside the node"
	keep     = "keep systemd from removing the kubelet's cgroup"
	hideMisc = "systemd must not see misc; undo-mount-hacks.service removes this"
)

func cg(id int, dev, root, dir, opts, optional string) string {
	f := []string{strconv.Itoa(id), "30", dev, root, "/sys/fs/cgroup/" + dir, "rw,nosuid,nodev,noexec,relatime"}
	if optional != "" {
		f = append(f, optional)
	}
	return strings.Join(append(f, "-", "cgroup", "cgroup", "rw,"+opts), " ")
}

// root is a kubelet root: mkdir, cpuset copies when given, self bind.
func root(dir string, cpuset ...string) []plan.Action {
	a := []plan.Action{plan.Mkdir(dir, 0o755)}
	if len(cpuset) == 2 {
		a = append(a, plan.WriteInPlace(dir+"/cpuset.cpus", []byte(cpuset[0])), plan.WriteInPlace(dir+"/cpuset.mems", []byte(cpuset[1])))
	}
	return append(a, plan.Bind(dir, dir).Because(keep))
}

func rootsOf(hierarchy string, cpuset ...string) []plan.Action {
	return append(root(hierarchy+"/kubelet", cpuset...), root(hierarchy+"/kubelet.slice", cpuset...)...)
}

func concat(parts ...[]plan.Action) []plan.Action {
	var out []plan.Action
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func private() []plan.Action {
	return []plan.Action{plan.Mount("", "/sys/fs/cgroup", "", system.Rec|system.Private, "").Because(rprivate)}
}

// removeMisc is misc's hierarchy removed and misc hidden from systemd
// with procCgroups, /proc/cgroups without it.
func removeMisc(procCgroups string) []plan.Action {
	return append(dropMisc(),
		plan.WriteFile(FakeCgroups, []byte(procCgroups), 0o644),
		plan.Bind(FakeCgroups, "/proc/cgroups").Because(hideMisc))
}

// dropMisc is misc's hierarchy unmounted and removed, as the script's
// "removing misc controller" does.
func dropMisc() []plan.Action {
	return []plan.Action{
		plan.Info("removing misc controller"),
		plan.Unmount("/sys/fs/cgroup/misc").OrWarn("failed umount /sys/fs/cgroup/misc"),
		plan.Remove("/sys/fs/cgroup/misc").OrWarn("failed rmdir /sys/fs/cgroup/misc"),
	}
}

// hideFromSystemd is the controllers named (a space-separated list)
// hidden from systemd with procCgroups, /proc/cgroups without them.
func hideFromSystemd(names, procCgroups string) []plan.Action {
	return []plan.Action{
		plan.Info("hiding from systemd the cgroup controllers the container is not in: " + names),
		plan.WriteFile(FakeCgroups, []byte(procCgroups), 0o644),
		plan.Bind(FakeCgroups, "/proc/cgroups").Because("systemd must not mount controllers the container is not in; undo-mount-hacks.service removes this"),
	}
}

// unscoped is, without a cgroup namespace, the hierarchy h (a name under
// /sys/fs/cgroup) that does not show the container's cgroup, unmounted
// and removed.
func unscoped(h string) []plan.Action {
	p := "/sys/fs/cgroup/" + h
	return []plan.Action{
		plan.Info("unmounting and removing " + p),
		plan.Unmount(p).OrWarn("failed to unmount " + p),
		plan.Remove(p).OrWarn("failed to rmdir " + p),
	}
}

func logs(msgs ...string) []plan.Action {
	var out []plan.Action
	for _, m := range msgs {
		lv, text, _ := strings.Cut(m, ": ")
		if lv == "WARN" {
			out = append(out, plan.Warning(text))
		} else {
			out = append(out, plan.Info(text))
		}
	}
	return out
}

var (
	noNS     = []string{"INFO: detected cgroup v1", "WARN: cgroupns not enabled! Please use cgroup v2, or cgroup v1 with cgroupns enabled.", "INFO: fixing cgroup mounts for all subsystems"}
	withNS   = []string{"INFO: detected cgroup v1", "INFO: detected cgroupns"}
	cpusetV  = [2][]byte{[]byte("0-3\n"), []byte("0\n")}
	procCgrp = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t4\t1\nmisc\t4\t1\t1\n"
)

func bindFull(hierarchy string) []plan.Action {
	target := "/sys/fs/cgroup/" + hierarchy + cid
	return []plan.Action{
		plan.Mkdir(target, 0o755),
		plan.Bind("/sys/fs/cgroup/"+hierarchy, target).Because("make " + cid + " resolve inside the container's hierarchy"),
	}
}

// scopedRoots is what fix_cgroup plans without a cgroup namespace once
// misc is dealt with, for hierarchies (names under /sys/fs/cgroup) that
// show the container's cgroup cid: each bound at cid, /sys/fs/cgroup
// rprivate, then the kubelet roots in each hierarchy and in cid inside it
// (cpuset's with the copies of cpusetV).
func scopedRoots(hierarchies ...string) []plan.Action {
	var binds, at, in [][]plan.Action
	for _, h := range hierarchies {
		var cpuset []string
		if h == "cpuset" {
			cpuset = []string{"0-3\n", "0\n"}
		}
		binds = append(binds, bindFull(h))
		at = append(at, rootsOf("/sys/fs/cgroup/"+h, cpuset...))
		in = append(in, rootsOf("/sys/fs/cgroup/"+h+cid, cpuset...))
	}
	return concat(concat(binds...), private(), concat(at...), concat(in...))
}

func TestPlanV1(t *testing.T) {
	tests := []struct {
		name string
		f    V1Facts
		want []plan.Action
	}{
		{
			name: "cgroupns: misc removed, kubelet roots with cpuset copies",
			f: V1Facts{
				Current: "/",
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", "/", "systemd", "xattr,name=systemd", "master:9"),
					cg(32, "0:27", "/", "cpuset", "cpuset", "master:10"),
					cg(33, "0:28", "/", "misc", "misc", "master:11")),
				MiscDir:     true,
				ProcCgroups: []byte(procCgrp),
				Cpuset:      map[string][2][]byte{"/sys/fs/cgroup/cpuset": cpusetV},
			},
			want: concat(logs(withNS...),
				removeMisc("#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t4\t1\n"),
				private(),
				rootsOf("/sys/fs/cgroup/systemd"),
				rootsOf("/sys/fs/cgroup/cpuset", "0-3\n", "0\n")),
		},
		{
			// Docker with a cgroup namespace on a host that mounts only
			// some hierarchies: the node's systemd would mount the others
			// after the kubelet roots were made.
			name: "cgroupns: controllers with no hierarchy are hidden from systemd, no misc",
			f: V1Facts{
				Current: "/",
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", "/", "systemd", "xattr,name=systemd", "master:9"),
					cg(32, "0:27", "/", "cpuset", "cpuset", "master:10"),
					cg(33, "0:28", "/", "cpu,cpuacct", "cpu,cpuacct", "master:11")),
				ProcCgroups: []byte("#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t4\t1\ncpu\t4\t1\t1\ncpuacct\t4\t1\t1\nhugetlb\t0\t1\t1\nhugetlb\t0\t1\t1\nrdma\t0\t1\t0\n"),
				Cpuset:      map[string][2][]byte{"/sys/fs/cgroup/cpuset": cpusetV},
			},
			want: concat(logs(withNS...),
				// rdma is disabled: systemd would not mount it
				hideFromSystemd("hugetlb", "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t4\t1\ncpu\t4\t1\t1\ncpuacct\t4\t1\t1\nrdma\t0\t1\t0\n"),
				private(),
				rootsOf("/sys/fs/cgroup/systemd"),
				rootsOf("/sys/fs/cgroup/cpuset", "0-3\n", "0\n"),
				rootsOf("/sys/fs/cgroup/cpu,cpuacct")),
		},
		{
			name: "cgroupns without name=systemd (WSL2): kubelet.slice in /sys/fs/cgroup/systemd anyway",
			f: V1Facts{
				Current: "/",
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", "/", "cpu", "cpu", "master:9"),
					cg(32, "0:27", "/", "cpuacct", "cpuacct", "master:10")),
			},
			want: concat(logs(withNS...), private(),
				rootsOf("/sys/fs/cgroup/cpu"), rootsOf("/sys/fs/cgroup/cpuacct"),
				root("/sys/fs/cgroup/systemd/kubelet.slice")),
		},
		{
			name: "cgroupns, /sys/fs/cgroup private before fix_mount: rprivate all the same",
			f: V1Facts{
				Current: "/",
				Mounts:  hosttest.Mounts(t, tmpfsLine, cg(31, "0:26", "/", "systemd", "xattr,name=systemd", "")),
			},
			want: concat(logs(withNS...), private(), rootsOf("/sys/fs/cgroup/systemd")),
		},
		{
			name: "cgroupns, kubelet roots made but /sys/fs/cgroup shared: rprivate only",
			f: V1Facts{
				Current: "/",
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", "/", "systemd", "xattr,name=systemd", "shared:5"),
					cg(40, "0:26", "/kubelet", "systemd/kubelet", "xattr,name=systemd", "shared:5"),
					cg(41, "0:26", "/kubelet.slice", "systemd/kubelet.slice", "xattr,name=systemd", "shared:5")),
			},
			want: concat(logs(withNS...), private()),
		},
		{
			name: "cgroupns, already applied: nothing",
			f: V1Facts{
				Current: "/",
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", "/", "systemd", "xattr,name=systemd", ""),
					cg(40, "0:26", "/kubelet", "systemd/kubelet", "xattr,name=systemd", ""),
					cg(41, "0:26", "/kubelet.slice", "systemd/kubelet.slice", "xattr,name=systemd", "")),
			},
			want: logs(withNS...),
		},
		{
			name: "no cgroupns: unscoped misc unmounted and removed, no fake /proc/cgroups",
			f: V1Facts{
				Current: cid,
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", cid, "systemd", "xattr,name=systemd", "master:9"),
					cg(32, "0:27", cid, "cpuset", "cpuset", "master:10"),
					cg(33, "0:28", "/", "misc", "misc", "master:11")),
				MiscDir:     true,
				ProcCgroups: []byte(procCgrp),
				Cpuset:      map[string][2][]byte{"/sys/fs/cgroup/cpuset": cpusetV},
			},
			want: concat(logs(noNS...),
				unscoped("misc"),
				scopedRoots("systemd", "cpuset")),
		},
		{
			// nerdctl on a host that mounts only some hierarchies
			// (testdata/hosts/nerdctl-v1-no-cgroupns): runc puts the
			// container in no cgroup of the others and mounts none of
			// them, but systemd would, at the host's root.
			name: "no cgroupns: controllers the container is not in are hidden from systemd, misc too",
			f: V1Facts{
				Current: cid,
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", cid, "systemd", "xattr,name=systemd", ""),
					cg(32, "0:27", cid, "cpuset", "cpuset", ""),
					cg(33, "0:28", cid, "misc", "misc", "")),
				MiscDir:     true,
				ProcCgroups: []byte("#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t4\t1\nnet_cls\t0\t1\t1\nhugetlb\t0\t1\t1\nrdma\t0\t1\t0\nnet_prio\t0\t1\t1\nmisc\t4\t1\t1\n"),
				Cpuset:      map[string][2][]byte{"/sys/fs/cgroup/cpuset": cpusetV},
			},
			want: concat(logs(noNS...),
				dropMisc(),
				// rdma is disabled: systemd would not mount it
				hideFromSystemd("net_cls hugetlb net_prio", "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t4\t1\nrdma\t0\t1\t0\n"),
				scopedRoots("systemd", "cpuset")),
		},
		{
			name: "no cgroupns: misc scoped to the container is hidden like with cgroupns",
			f: V1Facts{
				Current: cid,
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", cid, "systemd", "xattr,name=systemd", ""),
					cg(33, "0:28", cid, "misc", "misc", "")),
				MiscDir:     true,
				ProcCgroups: []byte("misc\t4\t1\t1\n"),
			},
			want: concat(logs(noNS...),
				removeMisc(""),
				scopedRoots("systemd")),
		},
		{
			name: "no cgroupns, already applied: nothing",
			f: V1Facts{
				Current: cid,
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", cid, "systemd", "xattr,name=systemd", ""),
					cg(32, "0:27", cid, "cpuset", "cpuset", ""),
					cg(40, "0:26", cid, "systemd"+cid, "xattr,name=systemd", ""),
					cg(41, "0:27", cid, "cpuset"+cid, "cpuset", ""),
					cg(42, "0:26", cid+"/kubelet", "systemd/kubelet", "xattr,name=systemd", ""),
					cg(43, "0:26", cid+"/kubelet.slice", "systemd/kubelet.slice", "xattr,name=systemd", ""),
					cg(44, "0:27", cid+"/kubelet", "cpuset/kubelet", "cpuset", ""),
					cg(45, "0:27", cid+"/kubelet.slice", "cpuset/kubelet.slice", "cpuset", ""),
					cg(46, "0:26", cid+"/kubelet", "systemd"+cid+"/kubelet", "xattr,name=systemd", ""),
					cg(47, "0:26", cid+"/kubelet.slice", "systemd"+cid+"/kubelet.slice", "xattr,name=systemd", ""),
					cg(48, "0:27", cid+"/kubelet", "cpuset"+cid+"/kubelet", "cpuset", ""),
					cg(49, "0:27", cid+"/kubelet.slice", "cpuset"+cid+"/kubelet.slice", "cpuset", "")),
				Cpuset: map[string][2][]byte{"/sys/fs/cgroup/cpuset": cpusetV},
			},
			want: logs(noNS...),
		},
		{
			name: "no cgroupns, binds made but not the kubelet roots under them: cpuset copied from the hierarchy",
			f: V1Facts{
				Current: cid,
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(32, "0:27", cid, "cpuset", "cpuset", ""),
					cg(41, "0:27", cid, "cpuset"+cid, "cpuset", ""),
					cg(44, "0:27", cid+"/kubelet", "cpuset/kubelet", "cpuset", ""),
					cg(45, "0:27", cid+"/kubelet.slice", "cpuset/kubelet.slice", "cpuset", "")),
				Cpuset: map[string][2][]byte{"/sys/fs/cgroup/cpuset": cpusetV},
			},
			want: concat(logs(noNS...), private(),
				rootsOf("/sys/fs/cgroup/cpuset"+cid, "0-3\n", "0\n"),
				root("/sys/fs/cgroup/systemd/kubelet.slice")),
		},
		{
			// A root above the cgroup namespace (the kernel's "/.."
			// form) is never the container's cgroup, however its text
			// ends: unmounted as unscoped, never joined to a path.
			name: "no cgroupns, a root above the namespace",
			f: V1Facts{
				Current: cid,
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", "/.."+cid, "memory", "memory", "")),
			},
			want: concat(logs(noNS...),
				unscoped("memory"),
				private(),
				root("/sys/fs/cgroup/systemd/kubelet.slice")),
		},
		{
			name: "no cgroupns, GitHub Actions roots and shared mounts",
			f: V1Facts{
				Current: "/actions_job/9f",
				Mounts: hosttest.Mounts(t, tmpfsLine,
					cg(31, "0:26", "/actions_job/9f", "memory", "memory", "shared:263 master:24")),
			},
			want: concat(logs(noNS...),
				[]plan.Action{
					plan.Mkdir("/sys/fs/cgroup/memory/actions_job/9f", 0o755),
					plan.Bind("/sys/fs/cgroup/memory", "/sys/fs/cgroup/memory/actions_job/9f").Because("make /actions_job/9f resolve inside the container's hierarchy"),
				},
				private(),
				rootsOf("/sys/fs/cgroup/memory"),
				rootsOf("/sys/fs/cgroup/memory/actions_job/9f"),
				root("/sys/fs/cgroup/systemd/kubelet.slice")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlanV1(tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, emptyIsNil); diff != "" {
				t.Errorf("PlanV1 (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanV1IsPure: planning does not change the facts it is given.
func TestPlanV1IsPure(t *testing.T) {
	f := V1Facts{
		Current: cid,
		Mounts:  hosttest.Mounts(t, tmpfsLine, cg(32, "0:27", cid, "cpuset", "cpuset", "")),
		Cpuset:  map[string][2][]byte{"/sys/fs/cgroup/cpuset": cpusetV},
	}
	if _, err := PlanV1(f); err != nil {
		t.Fatal(err)
	}
	want := map[string][2][]byte{"/sys/fs/cgroup/cpuset": cpusetV}
	if diff := cmp.Diff(want, f.Cpuset); diff != "" {
		t.Errorf("PlanV1 changed Facts.Cpuset (-want +got):\n%s", diff)
	}
}

func TestPlanV2(t *testing.T) {
	if diff := cmp.Diff([]plan.Action{plan.Info("detected cgroup v2")}, PlanV2(), emptyIsNil); diff != "" {
		t.Errorf("PlanV2 (-want +got):\n%s", diff)
	}
}

func TestDetectV1(t *testing.T) {
	mi := []string{
		tmpfsLine,
		cg(31, "0:26", cid, "cpu,cpuacct", "cpu,cpuacct", ""),
		cg(32, "0:27", cid, "cpuset", "cpuset", ""),
		cg(33, "0:28", "/", "misc", "misc", ""),
		// A kubelet root's self bind: its cpuset files are not read.
		cg(34, "0:27", cid+"/kubelet", "cpuset/kubelet", "cpuset", ""),
	}
	tree := hosttest.Tree(t, map[string]string{
		"proc/self/cgroup":                   "3:misc:/\n2:cpuset:" + cid + "\n1:cpu,cpuacct:" + cid + "\n",
		"proc/self/mountinfo":                strings.Join(mi, "\n") + "\n",
		"proc/cgroups":                       procCgrp,
		"sys/fs/cgroup/cpuset/cpuset.cpus":   "0-3\n",
		"sys/fs/cgroup/cpuset/cpuset.mems":   "0\n",
		"sys/fs/cgroup/misc/cgroup.procs":    "",
		"sys/fs/cgroup/cpu,cpuacct/.keep":    "",
		"sys/fs/cgroup/cpuset/kubelet/.keep": "",
	})
	got, err := DetectV1(tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := V1Facts{
		Current:     cid,
		Mounts:      hosttest.Mounts(t, mi...),
		MiscDir:     true,
		ProcCgroups: []byte(procCgrp),
		Cpuset:      map[string][2][]byte{"/sys/fs/cgroup/cpuset": cpusetV},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DetectV1 (-want +got):\n%s", diff)
	}
}

// cgroupMounts is a mount table of n cpuset mounts, as many as
// MaxV1Mounts allows when n is its value.
func cgroupMounts(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(cg(100+i, "0:36", "/", "cpuset/c"+strconv.Itoa(i), "cpuset", "") + "\n")
	}
	return b.String()
}

// TestDetectV1AtCap: as many cgroup mounts as the cap allows are planned.
func TestDetectV1AtCap(t *testing.T) {
	files := map[string]string{"proc/self/cgroup": "1:cpu:/\n", "proc/self/mountinfo": cgroupMounts(MaxV1Mounts)}
	f, err := DetectV1(hosttest.Tree(t, files), nil)
	if err != nil || len(f.Mounts) != MaxV1Mounts {
		t.Fatalf("DetectV1 of %d cgroup mounts: %d mounts, %v", MaxV1Mounts, len(f.Mounts), err)
	}
}

func TestDetectV1Errors(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"no /proc/self/cgroup", map[string]string{}, "open /proc/self/cgroup: no such file or directory"},
		// cgroup.controllers missing on a v2 host (a broken capture): say so,
		// not only that v1's cpu controller is missing.
		{"v2 only", map[string]string{"proc/self/cgroup": "0::/\n"},
			"/proc/self/cgroup: no cpu controller: it lists only the cgroup v2 hierarchy, yet /sys/fs/cgroup/cgroup.controllers (which cgroup v2 has) does not exist"},
		{"v2 only, CRLF", map[string]string{"proc/self/cgroup": "0::/docker/x\r\n\n"},
			"/proc/self/cgroup: no cpu controller: it lists only the cgroup v2 hierarchy, yet /sys/fs/cgroup/cgroup.controllers (which cgroup v2 has) does not exist"},
		{"empty", map[string]string{"proc/self/cgroup": ""}, "/proc/self/cgroup: no cpu controller"},
		{"garbage", map[string]string{"proc/self/cgroup": "\x00\x01"}, "/proc/self/cgroup: line 1: want id:controllers:path"},
		{
			"cpuset files missing",
			map[string]string{
				"proc/self/cgroup":    "1:cpu,cpuset:/\n",
				"proc/self/mountinfo": cg(31, "0:26", "/", "cpu,cpuset", "cpu,cpuset", "") + "\n",
			},
			"open /sys/fs/cgroup/cpu,cpuset/cpuset.cpus: no such file or directory",
		},
		{
			// The cap, before any cpuset file is read.
			"cgroup mounts over the cap",
			map[string]string{"proc/self/cgroup": "1:cpu:/\n", "proc/self/mountinfo": cgroupMounts(MaxV1Mounts + 1)},
			"/proc/self/mountinfo: 1025 cgroup mounts, more than the 1024 this step handles",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DetectV1(hosttest.Tree(t, tt.files), nil)
			if hosttest.ErrString(err) != tt.wantErr {
				t.Errorf("DetectV1 error = %q, want %q", hosttest.ErrString(err), tt.wantErr)
			}
		})
	}
}

func TestIsV2(t *testing.T) {
	for _, tt := range []struct {
		files map[string]string
		want  bool
	}{
		{map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu memory\n"}, true},
		{map[string]string{"sys/fs/cgroup/systemd/cgroup.procs": ""}, false},
		{map[string]string{}, false},
	} {
		got, err := IsV2(hosttest.Tree(t, tt.files))
		if err != nil || got != tt.want {
			t.Errorf("IsV2(%v) = %t, %v; want %t", tt.files, got, err, tt.want)
		}
	}
}
