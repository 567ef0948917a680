package check

// This file holds the rows about user namespaces, cgroups and the open-file
// limit.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/userns"
)

func (c *checker) userNS() Row {
	if !c.st.UserNS {
		return Row{"user-namespace", Pass, "no (uid_map is the full identity map)", ""}
	}
	m, _ := c.sys.ReadFile("/proc/self/uid_map", system.LimitConfig)
	return Row{"user-namespace", Pass, "yes (rootless): uid_map " + strings.Join(strings.Fields(string(m)), " "),
		"kind in a user namespace is experimental: see kind's rootless guide (cgroup v2 with delegation, RLIMIT_NOFILE, fuse-overlayfs)"}
}

func (c *checker) cgroupVersion() Row {
	if c.st.CgroupV2 {
		return Row{"cgroup-version", Pass, "v2 (unified)", ""}
	}
	obs := "v1 (legacy)"
	if m := system.Top(c.mi, cgroupfix.Root+"/unified"); m != nil && m.FSType == "cgroup2" {
		obs = "v1 (hybrid: cgroup2 also at " + cgroupfix.Root + "/unified)"
	}
	return Row{"cgroup-version", Warn, obs,
		"Kubernetes keeps cgroup v1 in maintenance mode (1.31+) and newer kubelets refuse it unless failCgroupV1 is false: boot the host with cgroup v2 (systemd.unified_cgroup_hierarchy=1)"}
}

func (c *checker) cgroupNS() Row {
	const name = "cgroupns"
	if c.st.CgroupV2 {
		m, r, ok := c.mountAt(name, cgroupfix.Root, "run the node --privileged (kind does)")
		switch {
		case !ok:
			return r
		case m.Root == "/":
			// The mount shows the namespace's root. (A privileged
			// container in the host's cgroup namespace would show the
			// host's root too; kind never makes one, and Docker's
			// default on v2 is private.)
			self, _ := cgroupfix.ReadSelfCgroup(c.sys)
			return Row{name, Pass, "yes (" + cgroupfix.Root + " is mounted at the namespace's root; this process is in " +
				self.Unified() + ")", ""}
		}
		return Row{name, Warn, "no: " + cgroupfix.Root + " shows the host's hierarchy at " + m.Root,
			"create the node with --cgroupns=private (kind v0.20+ does)"}
	}
	f, err := c.st.CgroupV1.Get()
	if many := (*cgroupfix.TooManyMountsError)(nil); errors.As(err, &many) {
		return Row{name, Fail, err.Error(), fmt.Sprintf("the mount table, not the cgroup namespace: the entrypoint stops (exit 15) at more than %d cgroup mounts, "+
			"before it looks at the container's cgroup; a v1 node has under a hundred, so something mounts cgroup hierarchies over and over "+
			"(in the node, or on the host with its mounts propagated into it): see %s", cgroupfix.MaxV1Mounts, system.MountinfoPath)}
	}
	if err != nil {
		return Row{name, Fail, err.Error(), "the entrypoint cannot find the container's cgroup: see /proc/self/cgroup"}
	}
	if f.Current == "/" {
		return Row{name, Pass, "yes (the container's cgroup is /)", ""}
	}
	return Row{name, Warn, "no: the container's cgroup is " + f.Current + " (the entrypoint re-binds every hierarchy)",
		"create the node with --cgroupns=private (kind v0.20+ does; Docker 20.10+ or Podman), or use cgroup v2"}
}

// v1Controllers are the cgroup v1 controllers, as mount options name them
// (the other options of a v1 mount are flags: xattr, name=systemd, ...).
var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "net_prio",
	"blkio", "perf_event", "hugetlb", "pids", "rdma", "misc", "debug"}

// cgroupV1Controllers lists the controllers of the v1 hierarchies mounted
// under /sys/fs/cgroup.
func (c *checker) cgroupV1Controllers() []string {
	var out []string
	for _, m := range c.mi {
		if m.FSType != "cgroup" || !strings.HasPrefix(m.Mountpoint, cgroupfix.Root+"/") {
			continue
		}
		for _, o := range strings.Split(m.VFSOptions, ",") {
			if slices.Contains(v1Controllers, o) && !slices.Contains(out, o) {
				out = append(out, o)
			}
		}
	}
	return out
}

func (c *checker) controllers() Row {
	const name = "cgroup-controllers"
	var have []string
	if c.st.CgroupV2 {
		controllers, err := cgroupfix.ReadControllers(c.sys)
		if err != nil {
			return Row{name, Fail, err.Error(), "run the node --privileged (kind does)"}
		}
		have = strings.Fields(controllers)
	} else {
		if r, ok := c.tableRow(name); ok {
			return r
		}
		have = c.cgroupV1Controllers()
	}
	joined := strings.Join(have, " ")
	obs := cmp.Or(joined, "none")
	if c.st.UserNS && c.st.CgroupV2 {
		obs += " (delegated to this user namespace)"
	}
	if missing := userns.Missing(joined); len(missing) > 0 {
		hint := "the kubelet needs the cpu, memory and pids controllers"
		if c.st.UserNS {
			hint = "delegate them to the user: a systemd drop-in for user@.service with Delegate=cpu cpuset io memory pids (kind's rootless guide); the entrypoint stops with \"" +
				userns.MissingError(missing).Error() + "\""
		}
		return Row{name, Fail, obs + "; missing " + strings.Join(missing, ", "), hint}
	}
	if !slices.Contains(have, "cpuset") {
		return Row{name, Warn, obs + "; missing cpuset",
			"the kubelet checks for the cpuset controller too: delegate or enable it (Delegate=cpu cpuset io memory pids)"}
	}
	return Row{name, Pass, obs, ""}
}

func (c *checker) cgroupMounts() Row {
	const name = "cgroup-mounts"
	if r, ok := c.tableRow(name); ok {
		return r
	}
	// A set, not a list searched for each mount: a table of 70k cgroup
	// mounts took a minute.
	rw := map[string]struct{}{}
	var ro []string
	for _, m := range c.mi {
		if (m.FSType != "cgroup" && m.FSType != "cgroup2") || (m.Mountpoint != cgroupfix.Root && !strings.HasPrefix(m.Mountpoint, cgroupfix.Root+"/")) {
			continue
		}
		if system.IsReadOnly(m) {
			ro = append(ro, m.Mountpoint)
		} else {
			rw[m.Mountpoint] = struct{}{}
		}
	}
	switch {
	case len(rw) == 0 && len(ro) == 0:
		return Row{name, Fail, "no cgroup filesystem under " + cgroupfix.Root, "run the node --privileged (kind does)"}
	case len(ro) > 0:
		return Row{name, Fail, "read-only: " + joinClipped(ro, ", "),
			"systemd and the kubelet create cgroups: run the node --privileged (kind does)"}
	}
	return Row{name, Pass, fmt.Sprintf("%d writable", len(rw)), ""}
}

func (c *checker) nofile() Row {
	n, err := c.sys.NofileHard()
	if err != nil {
		return Row{"nofile", Fail, err.Error(), unreadableHint}
	}
	obs := "hard RLIMIT_NOFILE " + strconv.FormatUint(n, 10)
	if n == ^uint64(0) {
		obs = "hard RLIMIT_NOFILE unlimited"
	}
	if n < userns.MinNofile {
		return Row{"nofile", Warn, obs, fmt.Sprintf(
			"containerd and the kubelet open many files; raise the hard limit to at least %d (rootless: LimitNOFILE in the engine's unit, or /etc/security/limits.conf)", userns.MinNofile)}
	}
	return Row{"nofile", Pass, obs, ""}
}
