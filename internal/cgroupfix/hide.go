package cgroupfix

import (
	"bytes"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/moby/sys/mountinfo"
)

// hideControllers removes misc when present (kind#3223: runc on v1 did
// not support it, and a nested runtime trips over the mismatch) and hides
// from systemd, which would mount them again from /proc/cgroups, misc and
// every controller with no hierarchy still mounted in the container:
// /proc/cgroups without their lines is bound over it until
// undo-mount-hacks.service removes the bind.
//
// Controllers with no hierarchy in the container: those just
// unmounted, and those its runtime did not mount, as runc does for the
// hierarchies the host has not mounted (on this project's test
// machines hugetlb, net_cls, net_prio and perf_event), with or without
// a cgroup namespace. systemd in the node mounts every controller
// /proc/cgroups lists, where runc left a directory; that mount shows
// the host's root cgroup (the leak unscoped hierarchies are unmounted
// for), or, in a private cgroup namespace, fails or not depending on
// whether another container holds that hierarchy. It comes after the
// kubelet roots were made, and the kubelet then refuses to start:
// "missing paths /sys/fs/cgroup/hugetlb/kubelet.slice". They are
// hidden from systemd as misc is.
func (p *v1Planner) hideControllers(misc bool) []plan.Action {
	if misc {
		p.mounted[miscDir] = false
	}
	var kept []*mountinfo.Info
	for _, m := range p.f.Mounts {
		if m.FSType == "cgroup" && p.mounted[m.Mountpoint] {
			kept = append(kept, m)
		}
	}
	names := notMounted(p.f.ProcCgroups, kept)
	if !misc && len(names) == 0 {
		return nil
	}
	var actions []plan.Action
	why := "systemd must not see misc; undo-mount-hacks.service removes this"
	if misc {
		actions = append(actions,
			plan.Info("removing misc controller"),
			plan.Unmount(miscDir).OrWarn("failed umount "+miscDir),
			plan.Remove(miscDir).OrWarn("failed rmdir "+miscDir))
	}
	if len(names) > 0 {
		actions = append(actions, plan.Info("hiding from systemd the cgroup controllers the container is not in: "+strings.Join(names, " ")))
		why = "systemd must not mount controllers the container is not in; undo-mount-hacks.service removes this"
	}
	return append(actions,
		plan.WriteFile(FakeCgroups, dropControllers(p.f.ProcCgroups, names), 0o644),
		plan.Bind(FakeCgroups, procCgroups).Because(why))
}

// dropControllers drops the lines of misc and of the controllers named
// from /proc/cgroups, keeping every other line byte for byte. Linear in
// both: the names are a set.
func dropControllers(b []byte, names []string) []byte {
	drop := make(map[string]bool, len(names)+1)
	drop["misc"] = true
	for _, n := range names {
		drop[n] = true
	}
	out := make([]byte, 0, len(b))
	for l := range bytes.Lines(b) {
		if drop[string(firstField(l))] {
			continue
		}
		out = append(out, l...)
	}
	return out
}

// notMounted lists the controllers /proc/cgroups says are enabled (but
// misc, hidden apart) that no mount in kept carries, once each, in its
// order. Linear in both: the options of kept are gathered once.
func notMounted(procCgroups []byte, kept []*mountinfo.Info) []string {
	carried := map[string]bool{}
	for _, m := range kept {
		for o := range strings.SplitSeq(m.VFSOptions, ",") {
			carried[o] = true
		}
	}
	var out []string
	for l := range bytes.Lines(procCgroups) {
		f := strings.Fields(string(l))
		if len(f) != 4 || strings.HasPrefix(f[0], "#") || f[0] == "misc" || f[3] != "1" || carried[f[0]] {
			continue
		}
		carried[f[0]] = true // listed once
		out = append(out, f[0])
	}
	return out
}

// firstField is the first field bytes.Fields would give, without
// splitting the whole line.
func firstField(l []byte) []byte {
	for f := range bytes.FieldsSeq(l) {
		return f
	}
	return nil
}
