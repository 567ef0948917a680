package check

// This file holds the rows about mounts: /sys, mount propagation and
// /lib/modules.

import (
	"strings"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

func (c *checker) sysMount() Row {
	const name = "sys"
	m, r, ok := c.mountAt(name, "/sys", "systemd and the kubelet need sysfs: run the node --privileged (kind does)")
	if !ok {
		return r
	}
	superRO := strings.HasPrefix(m.VFSOptions, "ro")
	switch {
	case superRO:
		return Row{name, Warn, "the sysfs superblock is read-only (" + m.VFSOptions + ")",
			"a plain remount,ro of /sys changed it for every namespace sharing it, the host's /sys included: remount it rw on the host (mount -o remount,rw /sys); the entrypoint only makes its own mount read-only"}
	case system.IsReadOnly(m):
		return Row{name, Pass, "read-only for this container (" + m.Options + ")", ""}
	case c.booted:
		return Row{name, Warn, "writable, although the node has booted",
			"fix_mount makes /sys read-only before systemd starts: see the entrypoint's log (docker logs NODE)"}
	}
	return Row{name, Pass, "writable; fix_mount makes it read-only for systemd, per mount", ""}
}

func (c *checker) propagation() Row {
	const name = "mount-propagation"
	root, r, ok := c.mountAt(name, "/", "every mount table lists /: run this in the node's own mount namespace")
	if !ok {
		return r
	}
	obs := "/ is " + propagationOf(root)
	if system.AllShared(c.mi, cgroupfix.Root) {
		return Row{name, Pass, obs + ", and every mount outside " + cgroupfix.Root, ""}
	}
	if c.booted {
		return Row{name, Warn, obs + ", not every mount is shared, although the node has booted",
			"the kubelet's Bidirectional volumes need shared mounts: fix_mount makes / rshared (see docker logs NODE)"}
	}
	return Row{name, Pass, obs + "; fix_mount makes / recursively shared", ""}
}

func propagationOf(m *mountinfo.Info) string {
	var shared, master bool
	for _, f := range strings.Fields(m.Optional) {
		shared = shared || strings.HasPrefix(f, "shared:")
		master = master || strings.HasPrefix(f, "master:")
	}
	switch {
	case shared && master:
		return "shared and slave"
	case shared:
		return "shared"
	case master:
		return "slave"
	}
	return "private"
}

func (c *checker) libModules() Row {
	const name = "lib-modules"
	hint := "kind mounts the host's /lib/modules read-only: kube-proxy (ipvs) and some CNI plugins load kernel modules"
	fi, err := c.sys.Stat("/lib/modules")
	if err != nil || !fi.IsDir() {
		return Row{name, Warn, "missing", hint}
	}
	rel, err := c.sys.ReadFile("/proc/sys/kernel/osrelease", system.LimitValue)
	release := strings.TrimSpace(string(rel))
	if err != nil || release == "" {
		return Row{name, Pass, "present; the running kernel is unknown (no /proc/sys/kernel/osrelease)", ""}
	}
	if _, err := c.sys.Stat("/lib/modules/" + release); err != nil {
		return Row{name, Warn, "no modules for the running kernel " + release, hint + " (modules built into the kernel need none)"}
	}
	return Row{name, Pass, "/lib/modules/" + release, ""}
}
