package check

// This file holds the row of POSIX ACLs on ZFS under a rootless node.

import (
	"slices"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// zfsACL warns when a node in a user namespace keeps containerd's
// directory on a ZFS dataset without POSIX ACLs (acltype=off, ZFS's
// default): fuse-overlayfs, the snapshotter of rootless nodes, exposes
// ACLs and then fails over such a dataset ("stat /pause: operation not
// supported", kind #4025; kind PR #4225 warns from `podman info`). The
// node sees it in its mount table: the mount holding /var/lib/containerd
// (kind's /var volume, else /) is of type zfs, and OpenZFS on Linux lists
// "posixacl" in the super options when acltype=posixacl ("noacl", or
// nothing on older releases, when off).
func (c *checker) zfsACL() Row {
	const name = "zfs-acl"
	const dir = "/var/lib/containerd"
	if !c.st.UserNS {
		return Row{name, Pass, "not rootless: the kernel's overlayfs needs no ACLs from the filesystem", ""}
	}
	if c.miErr != nil {
		return Row{name, Fail, c.miErr.Error(), unreadableHint}
	}
	m := system.Containing(c.mi, dir)
	if m == nil {
		return Row{name, Fail, system.MountinfoPath + " has no mount holding " + dir, unreadableHint}
	}
	obs := dir + " is on " + m.FSType + " (mounted at " + m.Mountpoint + ")"
	if m.FSType != "zfs" {
		return Row{name, Pass, obs, ""}
	}
	obs = dir + " is on the zfs dataset " + m.Source + " (mounted at " + m.Mountpoint + "), super options " + m.VFSOptions
	if slices.Contains(strings.Split(m.VFSOptions, ","), "posixacl") {
		return Row{name, Pass, obs, ""}
	}
	return Row{name, Warn, obs + ": no POSIX ACLs",
		"fuse-overlayfs fails over it (\"stat /pause: operation not supported\", kind #4025, PR #4225): on the host, zfs set acltype=posixacl " + m.Source + ", then recreate the cluster"}
}
