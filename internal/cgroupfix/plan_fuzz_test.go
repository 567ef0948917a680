package cgroupfix

import (
	"bytes"
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// FuzzPlanV1 drives fix_cgroup's choice of cgroup mounts with arbitrary
// mount tables (through the same mountinfo parser as the host's) and
// container cgroups. For every table the kernel could write:
//   - the plan is a pure function of the facts;
//   - it only unmounts and removes cgroup mounts of the table (and misc),
//     and only creates, writes and binds in cgroup hierarchies (and the
//     fake /proc/cgroups);
//   - a directory is made before anything is bound onto it, and nothing
//     is made or bound twice;
//   - applied to a fake host (system.Tree) without a failure, planning
//     again finds nothing left to do: a restart converges.
func FuzzPlanV1(f *testing.F) {
	for _, s := range []string{"docker-v1-cgroupns", "docker-v1-no-cgroupns", "podman-v1-no-cgroupns", "github-actions-v1", "wsl2-v1-no-systemd", "v1-misc", "cloudshell-v1"} {
		root := filepath.Join(hosttest.HostsDir(), s, "root")
		mi, err := os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
		if err != nil {
			continue
		}
		self, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
		if err != nil {
			f.Fatal(err)
		}
		current, err := ParseSelfCgroup(self).CPU()
		if err != nil {
			f.Fatal(err)
		}
		_, misc := os.Stat(filepath.Join(root, miscDir))
		f.Add(mi, current, misc == nil)
	}
	f.Add([]byte(tmpfsLine+"\n"+cg(31, "0:26", "/docker/a b", "cpu,cpuacct", "cpu,cpuacct", "master:3")+"\n"), "/docker/a b", false)
	f.Add([]byte(tmpfsLine+"\n"+cg(31, "0:26", "/", `my\040hier`, "cpuset", "")+"\n"), "/", true)
	// Roots above the cgroup namespace, as the kernel shows them.
	f.Add([]byte(tmpfsLine+"\n"+cg(31, "0:26", "/../docker/x", "memory", "memory", "")+"\n"+cg(32, "0:27", "/..", "cpuset", "cpuset", "")+"\n"), "/docker/x", false)

	f.Fuzz(func(t *testing.T, table []byte, current string, misc bool) {
		mi := plausibleMounts(table)
		current = path.Clean("/" + current)
		if len(mi) == 0 || strings.ContainsAny(current, "\x00\n\r") {
			return
		}
		facts := V1Facts{Current: current, Mounts: mi, MiscDir: misc, ProcCgroups: []byte("misc\t1\t1\t1\n"), Cpuset: map[string][2][]byte{}}
		for _, m := range mi {
			if isCpusetMount(m) && path.Dir(m.Mountpoint) == Root {
				facts.Cpuset[m.Mountpoint] = [2][]byte{[]byte("0-1\n"), []byte("0\n")}
			}
		}
		actions, err := PlanV1(facts)
		if err != nil {
			return
		}
		again, _ := PlanV1(facts)
		if diff := cmp.Diff(actions, again); diff != "" {
			t.Fatalf("PlanV1 is not a function of its facts:\n%s", diff)
		}
		checkV1Actions(t, facts, actions)
		checkV1Converges(t, facts)
	})
}

// plausibleMounts reads the lines of table the mountinfo parser accepts
// (a mutation rarely keeps every line whole) and makes them look as the
// kernel writes them: mount points and roots clean absolute paths, but for
// the roots above a cgroup namespace ("/../.."); a few dozen mounts at
// most, to keep each run short.
func plausibleMounts(table []byte) []*mountinfo.Info {
	var out []*mountinfo.Info
	for line := range bytes.Lines(table) {
		mi, err := system.ParseMountinfo(line)
		if err != nil {
			continue
		}
		for _, m := range mi {
			m.Mountpoint = path.Clean("/" + m.Mountpoint)
			if !strings.HasPrefix(m.Root, "/..") {
				m.Root = path.Clean("/" + m.Root)
			}
			if len(m.Mountpoint) > 200 || len(m.Root) > 200 || strings.ContainsRune(m.Mountpoint+m.Root, 0) {
				continue
			}
			out = append(out, m)
		}
		if len(out) > 40 {
			return nil
		}
	}
	return out
}

func checkV1Actions(t *testing.T, f V1Facts, actions []plan.Action) {
	cgroupMounts := map[string]bool{miscDir: true}
	for _, m := range f.Mounts {
		if m.FSType == "cgroup" {
			cgroupMounts[m.Mountpoint] = true
		}
	}
	// Kubelet roots go into v1 hierarchies wherever they are mounted, as
	// the reference's findmnt finds them, and into the systemd one.
	inHierarchy := func(p string) bool {
		if path.Clean(p) != p {
			return false // a ".." leads elsewhere
		}
		if system.Under(p, systemdDir) {
			return true
		}
		for mp := range cgroupMounts {
			if system.Under(p, mp) {
				return true
			}
		}
		return false
	}
	made := map[string]bool{}
	bound := map[string]bool{}
	for _, a := range actions {
		switch a.Op {
		case plan.OpLog:
		case plan.OpUnmount, plan.OpRemove:
			if !cgroupMounts[a.Path] {
				t.Fatalf("%v: not a cgroup mount of the table", a)
			}
		case plan.OpMkdir:
			if !inHierarchy(a.Path) || made[a.Path] {
				t.Fatalf("%v: outside the cgroup hierarchies, or made twice", a)
			}
			made[a.Path] = true
		case plan.OpWriteInPlace:
			if !made[path.Dir(a.Path)] {
				t.Fatalf("%v: into a directory not made by the plan", a)
			}
		case plan.OpWrite:
			if a.Path != FakeCgroups {
				t.Fatalf("%v: writes a file", a)
			}
		case plan.OpMount:
			switch {
			case a.Flags&system.Bind != 0 && a.Path == procCgroups:
			case a.Flags&system.Bind != 0:
				if !made[a.Path] || bound[a.Path] {
					t.Fatalf("%v: onto a directory not made first, or bound twice", a)
				}
				bound[a.Path] = true
			case a.Flags == system.Rec|system.Private && a.Path == Root:
			default:
				t.Fatalf("%v: unexpected mount", a)
			}
		default:
			t.Fatalf("%v: unexpected action", a)
		}
	}
}

// checkV1Converges applies the plan to a fake host holding the table and
// plans again.
func checkV1Converges(t *testing.T, f V1Facts) {
	// The sandbox keeps TMPDIR in memory (nstest.Sandbox): each run
	// makes a tree.
	dir, err := os.MkdirTemp("", "plan-v1-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tree := system.NewTree(dir)
	var table strings.Builder
	for _, m := range f.Mounts {
		table.WriteString(system.FormatMountinfo(m) + "\n")
		if err := hosttest.Files(t, tree).MkdirAll(m.Mountpoint, 0o755); err != nil {
			return // a name the filesystem refuses
		}
	}
	files := map[string]string{
		"/proc/self/mountinfo": table.String(),
		ProcSelfCgroup:         "2:cpu,cpuacct:" + f.Current + "\n",
		procCgroups:            string(f.ProcCgroups),
	}
	for mp := range f.Cpuset {
		files[mp+"/cpuset.cpus"] = "0-1\n"
		files[mp+"/cpuset.mems"] = "0\n"
	}
	for p, content := range files {
		if err := hosttest.Files(t, tree).MkdirAll(path.Dir(p), 0o755); err != nil {
			return
		}
		if err := hosttest.Files(t, tree).WriteFile(p, []byte(content), 0o644); err != nil {
			return
		}
	}
	hosttest.Files(t, tree).MkdirAll("/kind", 0o755)
	if f.MiscDir {
		hosttest.Files(t, tree).MkdirAll(miscDir, 0o755)
	} else if fi, err := os.Stat(tree.Path(miscDir)); err == nil && fi.IsDir() {
		return // misc is mounted there after all
	}

	detected, err := DetectV1(tree, nil)
	if err != nil {
		t.Fatalf("DetectV1 on the table: %v", err)
	}
	actions, err := PlanV1(detected)
	if err != nil {
		return
	}
	var log bytes.Buffer
	if err := plan.Apply(context.Background(), tree, logline.New(&log, logline.Text), actions, false); err != nil {
		return // fatal: this boot stops here
	}
	if strings.Contains(log.String(), "WARN: failed") {
		return // a warned failure is retried on the next boot
	}
	next, err := DetectV1(tree, nil)
	if err != nil {
		t.Fatalf("DetectV1 after applying: %v", err)
	}
	second, err := PlanV1(next)
	if err != nil {
		t.Fatalf("PlanV1 after applying: %v", err)
	}
	if !plan.Converged(second) {
		mi, _ := tree.ReadFile("/proc/self/mountinfo", system.LimitTable)
		t.Fatalf("a second boot still plans changes:\n%v\nfirst plan:\n%v\nmount table after the first:\n%s",
			plan.Changes(second), actions, mi)
	}
}
