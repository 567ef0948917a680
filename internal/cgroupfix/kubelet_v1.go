package cgroupfix

// The kubelet roots of a cgroup v1 node: the hierarchies they go into, the
// cpuset values they inherit, and the self binds that keep systemd from
// removing them.

import (
	"path"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// cgroupShown is a cgroup as a mount shows it: its filesystem and root.
type cgroupShown struct {
	major, minor int
	root         string
}

// cpusetShown indexes the cpuset files read by the cgroup each hierarchy
// mount shows, the first mount's for a cgroup shown twice.
func cpusetShown(f V1Facts) map[cgroupShown][2][]byte {
	out := map[cgroupShown][2][]byte{}
	for _, h := range f.Mounts {
		if !isCpusetMount(h) { // first: a table may hold 700k other mounts
			continue
		}
		v, ok := f.Cpuset[h.Mountpoint]
		k := cgroupShown{h.Major, h.Minor, h.Root}
		if _, seen := out[k]; ok && !seen {
			out[k] = v
		}
	}
	return out
}

// cpusetOf finds the cpuset files of the cgroup mounted at m: read for a
// hierarchy mount, or those of the hierarchy mount showing the same cgroup
// (same filesystem, same root; shown is cpusetShown) for another mount of
// it, such as the bind of the container's cgroup at its full path made
// without cgroupns. Looking for that mount in the table for each mount
// made 50k cpuset mounts of other cgroups 2.5G lookups.
func cpusetOf(f V1Facts, shown map[cgroupShown][2][]byte, m *mountinfo.Info) ([2][]byte, bool) {
	if !isCpusetMount(m) {
		return [2][]byte{}, false
	}
	if v, ok := f.Cpuset[m.Mountpoint]; ok {
		return v, true
	}
	v, ok := shown[cgroupShown{m.Major, m.Minor, m.Root}]
	return v, ok
}

// ofContainer: the mount belongs to the container's cgroup, as the
// reference's `findmnt -o source,target | grep -F CURRENT` decides. When
// the container's cgroup is not "/", a root the kernel shows above the
// cgroup namespace ("/../x", kept by system.ParseMountinfo) never is,
// whatever its text holds: the full-path bind joins the root to the mount
// point, and would lead out of the hierarchy.
func (p *v1Planner) ofContainer(m *mountinfo.Info) bool {
	if p.f.Current != "/" && strings.HasPrefix(m.Root, "/") && path.Clean(m.Root) != m.Root {
		return false
	}
	return strings.Contains(m.Root, p.f.Current) || strings.Contains(m.Mountpoint, p.f.Current)
}

// subsystems lists the v1 hierarchies the kubelet roots go into: the
// container's cgroup mounts still mounted, then the binds planned above.
func (p *v1Planner) subsystems(binds []*mountinfo.Info) []*mountinfo.Info {
	var out []*mountinfo.Info
	for _, m := range p.f.Mounts {
		if m.FSType == "cgroup" && p.mounted[m.Mountpoint] && p.ofContainer(m) && !isKubeletRoot(m.Mountpoint) {
			out = append(out, m)
		}
	}
	for _, b := range binds {
		if b.FSType == "cgroup" {
			out = append(out, b)
		}
	}
	return out
}

// kubeletRoots makes /sys/fs/cgroup private (the kubelet roots' self binds
// must not propagate to the host), then creates and self-binds the kubelet
// roots in every hierarchy: the self bind keeps systemd from removing them
// before the kubelet starts. It returns actions with these appended.
func (p *v1Planner) kubeletRoots(actions []plan.Action, subsystems []*mountinfo.Info) []plan.Action {
	// Appended in place after the private remount, which goes first: two
	// actions per root, a cpuset hierarchy's two more (not counting them
	// made 50k cpuset mounts grow the plan by doubling).
	n := 1 + 2*2 // the remount, a kubelet.slice in name=systemd
	for _, s := range subsystems {
		n += 2 * 2
		if _, ok := p.cpuset[s.Mountpoint]; ok {
			n += 2 * 2
		}
	}
	actions = slices.Grow(actions, n)
	start := len(actions)
	actions = append(actions, plan.Mount("", Root, "", system.Rec|system.Private, "").
		Because("the kubelet roots' binds stay inside the node"))
	systemd := false
	for _, s := range subsystems {
		systemd = systemd || strings.Contains(s.Mountpoint, systemdDir)
		for _, r := range KubeletRoots {
			actions = p.kubeletRoot(actions, s.Mountpoint, r)
		}
	}
	// No name=systemd hierarchy (WSL2, hosts without systemd): the systemd
	// cgroup driver still wants kubelet.slice there.
	if !systemd {
		actions = p.kubeletRoot(actions, systemdDir, "/kubelet.slice")
	}
	// Whenever roots are made, even if the mounts look private now: fix_mount
	// has just made every mount shared (a dry run, planning each step before
	// the previous one applied, would not see that).
	if len(actions) == start+1 && p.RootPrivate() {
		return actions[:start]
	}
	return actions
}

// kubeletRoot appends what makes one kubelet root to actions.
func (p *v1Planner) kubeletRoot(actions []plan.Action, subsystem, root string) []plan.Action {
	target := subsystem + root
	if p.mounted[target] {
		return actions
	}
	p.mounted[target] = true
	actions = append(actions, plan.Mkdir(target, 0o755))
	if v, ok := p.cpuset[subsystem]; ok {
		// A cpuset cgroup with empty cpus or mems refuses tasks (ENOSPC).
		actions = append(actions,
			plan.WriteInPlace(target+"/cpuset.cpus", v[0]),
			plan.WriteInPlace(target+"/cpuset.mems", v[1]))
	}
	return append(actions, plan.Bind(target, target).Because("keep systemd from removing the kubelet's cgroup"))
}

// RootPrivate: every mount at or under /sys/fs/cgroup is private (none
// shared or a slave), and there is at least one.
func (p *v1Planner) RootPrivate() bool {
	found := false
	for _, m := range p.f.Mounts {
		if !system.Under(m.Mountpoint, Root) {
			continue
		}
		found = true
		for o := range strings.FieldsSeq(m.Optional) {
			if strings.HasPrefix(o, "shared:") || strings.HasPrefix(o, "master:") {
				return false
			}
		}
	}
	return found
}

// isKubeletRoot: a kubelet root's self bind is a cgroup mount too, but not
// a hierarchy to put kubelet roots in.
func isKubeletRoot(mountpoint string) bool {
	return slices.ContainsFunc(KubeletRoots, func(r string) bool { return strings.HasSuffix(mountpoint, r) })
}
