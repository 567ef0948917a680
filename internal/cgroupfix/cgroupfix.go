package cgroupfix

import (
	"fmt"
	"path"
	"strings"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

const (
	miscDir     = Root + "/misc"
	systemdDir  = Root + "/systemd"
	procCgroups = "/proc/cgroups"
	// FakeCgroups is /proc/cgroups without misc, bound over it until
	// undo-mount-hacks.service removes the bind.
	FakeCgroups = "/kind/fake-cgroups"
)

// KubeletRoots are the cgroups the kubelet is told to use (cgroupfs and
// systemd drivers), so that nested clusters don't manage each other's pods.
var KubeletRoots = []string{"/kubelet", "/kubelet.slice"}

// IsV2 reports whether the unified hierarchy is mounted at /sys/fs/cgroup.
func IsV2(sys system.System) (bool, error) {
	_, err := sys.Stat(ControllersFile)
	if system.NotExist(err) {
		return false, nil
	}
	return err == nil, err
}

// PlanV2 is all fix_cgroup does on cgroup v2.
func PlanV2() []plan.Action {
	return []plan.Action{plan.Info("detected cgroup v2")}
}

// DetectedV1 is fix_cgroup's first line on cgroup v1, the line kind's CLI
// waits for in the node's log. It comes before anything of the host's
// cgroups is read, as in the script: a node that cannot go on still
// prints it, so kind reports the failure instead of waiting.
func DetectedV1() plan.Action { return plan.Info("detected cgroup v1") }

// V1Facts is what fix_cgroup needs on cgroup v1.
type V1Facts struct {
	// Current is the container's cgroup: the path of the cpu controller in
	// /proc/self/cgroup; "/" means a cgroup namespace.
	Current string
	Mounts  []*mountinfo.Info
	// MiscDir: /sys/fs/cgroup/misc is a directory.
	MiscDir bool
	// ProcCgroups is /proc/cgroups (nil where a replayed host lacks it
	// and misc need not be hidden).
	ProcCgroups []byte
	// Cpuset holds cpuset.cpus and cpuset.mems of each cpuset hierarchy
	// mounted directly under /sys/fs/cgroup, by mount point.
	Cpuset map[string][2][]byte
}

// MaxV1Mounts is the most cgroup mounts fix_cgroup plans for on cgroup
// v1. Its plan holds four to eight actions for each (kubelet roots, their
// binds, cpuset files): the table's 16 MiB cap held 150k, whose plan took
// 2 s and 460 MiB. A v1 node has a dozen hierarchies, their
// binds and their kubelet roots: under a hundred.
const MaxV1Mounts = 1024

// TooManyMountsError is DetectV1's refusal of a table of more than
// MaxV1Mounts cgroup mounts: check tells it from a cgroup not found.
type TooManyMountsError struct{ N int }

func (e *TooManyMountsError) Error() string {
	return fmt.Sprintf("%s: %d cgroup mounts, more than the %d this step handles", system.MountinfoPath, e.N, MaxV1Mounts)
}

// countCgroupMounts counts the cgroup (v1 or v2) mounts of a table.
func countCgroupMounts(mounts []*mountinfo.Info) int {
	n := 0
	for _, m := range mounts {
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			n++
		}
	}
	return n
}

// DetectV1 reads the facts.
func DetectV1(sys system.System, tbl *system.MountTable) (V1Facts, error) {
	var f V1Facts
	self, err := ReadSelfCgroup(sys)
	if err != nil {
		return f, err
	}
	if f.Current, err = self.CPU(); err != nil {
		if self.OnlyUnified() {
			// This step runs because cgroup.controllers is missing; the
			// host says v2 all the same.
			return f, fmt.Errorf("%s: %w: it lists only the cgroup v2 hierarchy, yet %s (which cgroup v2 has) does not exist", ProcSelfCgroup, err, ControllersFile)
		}
		return f, fmt.Errorf("%s: %w", ProcSelfCgroup, err)
	}
	if f.Mounts, err = tbl.Read(sys); err != nil {
		return f, err
	}
	if n := countCgroupMounts(f.Mounts); n > MaxV1Mounts {
		return f, &TooManyMountsError{N: n}
	}
	if fi, err := sys.Stat(miscDir); err == nil && fi.IsDir() {
		f.MiscDir = true
	}
	if f.ProcCgroups, err = sys.ReadFile(procCgroups, system.LimitConfig); err != nil && (f.MiscDir || !system.NotExist(err)) {
		return f, err
	}
	f.Cpuset = map[string][2][]byte{}
	for _, m := range f.Mounts {
		// Only a hierarchy's own mount: the kubelet roots' self binds
		// need nothing, and a bind of the container's cgroup elsewhere
		// shows the same cgroup as its hierarchy mount (see cpusetOf).
		if !isCpusetMount(m) || path.Dir(m.Mountpoint) != Root {
			continue
		}
		var v [2][]byte
		for i, name := range [2]string{"cpuset.cpus", "cpuset.mems"} {
			if v[i], err = sys.ReadFile(path.Join(m.Mountpoint, name), system.LimitValue); err != nil {
				return f, err
			}
		}
		f.Cpuset[m.Mountpoint] = v
	}
	return f, nil
}

func isCpusetMount(m *mountinfo.Info) bool {
	return m.FSType == "cgroup" && hasOption(m.VFSOptions, "cpuset")
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// PlanV1 returns fix_cgroup's actions on cgroup v1.
func PlanV1(f V1Facts) ([]plan.Action, error) {
	// Sized for the mounts looked up, their full-path binds and two
	// kubelet roots each: growing these maps was a good part of
	// planning's allocations. Only mounts the plan may look up are in it
	// (see lookedUp): 350k other mounts made a map of 50 MiB.
	var mounts []string
	cpuset, shown := map[string][2][]byte{}, cpusetShown(f)
	for _, m := range f.Mounts {
		if lookedUp(m) {
			mounts = append(mounts, m.Mountpoint)
		}
		if v, ok := cpusetOf(f, shown, m); ok {
			cpuset[m.Mountpoint] = v
		}
	}
	p := &v1Planner{f: f, mounted: make(map[string]bool, 4*len(mounts)), cpuset: cpuset}
	for _, m := range mounts {
		p.mounted[m] = true
	}
	actions := []plan.Action{DetectedV1()}
	if f.Current == "/" {
		actions = append(actions, plan.Info("detected cgroupns"))
		actions = append(actions, p.hideControllers(f.MiscDir)...)
		return p.kubeletRoots(actions, p.subsystems(nil)), nil
	}

	actions = append(actions,
		plan.Warning("cgroupns not enabled! Please use cgroup v2, or cgroup v1 with cgroupns enabled."),
		plan.Info("fixing cgroup mounts for all subsystems"))
	// Hierarchies the container's runtime did not scope to its cgroup
	// expose the host's root cgroup; a runtime inside that creates cgroups
	// there leaks them to the host (kubernetes/kubernetes#109182).
	removed := map[string]bool{}
	for _, m := range f.Mounts {
		if m.FSType == "cgroup" && !p.ofContainer(m) {
			actions = append(actions,
				plan.Info("unmounting and removing "+m.Mountpoint),
				plan.Unmount(m.Mountpoint).OrWarn("failed to unmount "+m.Mountpoint),
				plan.Remove(m.Mountpoint).OrWarn("failed to rmdir "+m.Mountpoint))
			removed[m.Mountpoint] = true
			p.mounted[m.Mountpoint] = false
		}
	}
	actions = append(actions, p.hideControllers(f.MiscDir && !removed[miscDir])...)

	// Docker binds the container's cgroup over each hierarchy's root, but
	// /proc/self/cgroup still names the full path; bind each hierarchy at
	// that path too so that the kubelet and cAdvisor find their cgroups.
	// Only the hierarchies' own mounts, still mounted (not misc, just
	// removed): after a first run the kubelet roots and these binds are
	// cgroup mounts too, and binding them again would never end.
	var binds []*mountinfo.Info
	for _, m := range f.Mounts {
		if !p.mounted[m.Mountpoint] || (m.FSType != "cgroup" && m.FSType != "cgroup2") ||
			m.Root == "/" || path.Dir(m.Mountpoint) != Root {
			continue
		}
		target := m.Mountpoint + m.Root
		if p.mounted[target] {
			continue
		}
		actions = append(actions,
			plan.Mkdir(target, 0o755),
			plan.Bind(m.Mountpoint, target).Because("make "+m.Root+" resolve inside the container's hierarchy"))
		p.mounted[target] = true
		b := *m
		b.Mountpoint = target
		binds = append(binds, &b)
		if v, ok := p.cpuset[m.Mountpoint]; ok {
			p.cpuset[target] = v
		}
	}
	return p.kubeletRoots(actions, p.subsystems(binds)), nil
}

// lookedUp: m's mount point may be one the plan asks about (in
// v1Planner.mounted): a cgroup mount (removed, bound, holding kubelet
// roots), a mount under /sys/fs/cgroup (where binds go), or a kubelet
// root, which goes right under a cgroup mount wherever that is.
func lookedUp(m *mountinfo.Info) bool {
	return m.FSType == "cgroup" || m.FSType == "cgroup2" || system.Under(m.Mountpoint, Root) || isKubeletRoot(m.Mountpoint)
}

type v1Planner struct {
	f       V1Facts
	mounted map[string]bool
	// cpuset: the cpuset.cpus and cpuset.mems a kubelet root under each
	// cpuset mount point copies (Facts.Cpuset is not changed: Plan is pure).
	cpuset map[string][2][]byte
}
