package check

// This file holds the rows about storage: the filesystems under /kind and
// containerd, overlayfs and /dev/fuse for the snapshotter.

import (
	"fmt"
	"io/fs"
	"path"

	"github.com/kind-entrypoint/entrypoint/internal/containerd"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// storage is the rows of /kind's and containerd's filesystems (and ACLs
// on ZFS), the snapshotter that follows, overlay, and /dev/fuse.
func (c *checker) storage() []Row {
	cf, err := c.st.Containerd.Get()
	if err != nil {
		rows := append(failRows(err, unreadableHint, "fs-kind", "fs-containerd"), c.zfsACL())
		rows = append(rows, failRows(err, "configure_containerd cannot choose a snapshotter", "snapshotter")...)
		return append(rows, failRows(err, unreadableHint, "overlay", "dev-fuse")...)
	}
	snap, source := cf.Snapshotter, cf.SnapshotterSource
	if snap == "" {
		res, err := containerd.Edit(cf.Config, containerd.Change{})
		switch {
		case cf.Config == nil:
			snap, source = "overlayfs", "containerd's default: no "+containerd.ConfigPath
		case err != nil:
			snap, source = "overlayfs", fmt.Sprintf("containerd's default; %s: %v", containerd.ConfigPath, err)
		case res.OldSnapshotter == "":
			snap, source = "overlayfs", "containerd's default, no snapshotter in "+containerd.ConfigPath
		default:
			snap, source = res.OldSnapshotter, "set in "+containerd.ConfigPath
		}
	}
	rows := []Row{c.fsKind(cf.KindFSType, snap), c.fsContainerd(snap), c.zfsACL(),
		{"snapshotter", Pass, snap + " (" + source + ")", ""}}
	return append(rows, c.overlay(cf, snap), c.devFuse(snap))
}

func (c *checker) fsKind(fstype, snap string) Row {
	const name = "fs-kind"
	obs := "/kind is on " + fstype
	switch {
	case !c.kind:
		return Row{name, Warn, "no /kind: not a kind node image",
			"run check in the node image: docker run --rm --privileged --entrypoint /usr/local/bin/entrypoint IMAGE check"}
	case fstype == "zfs":
		return Row{name, Warn, obs + ": snapshotter " + snap,
			"the native snapshotter copies every layer (slow, large); OpenZFS 2.2+ supports overlayfs: set KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=overlayfs to use it"}
	case fstype == "aufs":
		return Row{name, Warn, obs, "aufs is long deprecated in Docker: switch the engine to overlay2"}
	case fstype == "fuseblk":
		return Row{name, Pass, obs + " (FUSE): snapshotter " + snap, ""}
	}
	return Row{name, Pass, obs, ""}
}

// fsType is the filesystem of p, or of its nearest existing parent.
func (c *checker) fsType(p string) (string, string, error) {
	for {
		t, err := c.sys.FSType(p)
		if err == nil || !system.NotExist(err) || p == "/" {
			return t, p, err
		}
		p = path.Dir(p)
	}
}

func (c *checker) fsContainerd(snap string) Row {
	const name = "fs-containerd"
	const dir = "/var/lib/containerd"
	t, at, err := c.fsType(dir)
	if err != nil {
		return Row{name, Fail, err.Error(), unreadableHint}
	}
	obs := dir + " is on " + t
	if at != dir {
		obs = fmt.Sprintf("%s does not exist yet; %s is on %s", dir, at, t)
	}
	if (t == "overlayfs" || t == "aufs") && snap == "overlayfs" {
		return Row{name, Fail, obs,
			"the overlayfs snapshotter cannot put its layers on " + t + ": give the node a volume for /var (kind does)"}
	}
	return Row{name, Pass, obs, ""}
}

func (c *checker) overlay(cf containerd.Facts, snap string) Row {
	const name = "overlay"
	switch {
	case cf.PermitMountsInUserNS:
		return Row{name, Warn, "not tried: the kernel has Debian's permit_mounts_in_userns patch, known to be unstable (moby/moby#42302); snapshotter " + snap,
			"the entrypoint avoids overlayfs here: fuse-overlayfs needs /dev/fuse (see dev-fuse)"}
	case cf.UserNS && cf.OverlayErr == nil && cf.SELinux:
		return Row{name, Warn, "mounts in this user namespace, under an SELinux label",
			"before Linux 5.13 overlayfs in a user namespace fails under enforcing SELinux: if pods fail to start, set KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=fuse-overlayfs"}
	}
	err := cf.OverlayErr
	if !cf.OverlayTried {
		err = c.sys.OverlayTrial()
	}
	if err == nil {
		return Row{name, Pass, "a trial overlay mount works", ""}
	}
	obs := "a trial overlay mount fails: " + err.Error()
	if tmp, _, terr := c.fsType("/tmp"); terr == nil && (tmp == "overlayfs" || tmp == "aufs") {
		// The trial's upper layer is under /tmp: on overlay, it fails
		// whatever containerd's own directory would do.
		return Row{name, Warn, obs + " (its upper layer was on /tmp, itself on " + tmp + ")",
			"run the node with a tmpfs /tmp (kind does) and check again"}
	}
	if snap == "overlayfs" {
		return Row{name, Fail, obs + "; the snapshotter is overlayfs",
			"set KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=fuse-overlayfs (and give the node /dev/fuse), or native"}
	}
	return Row{name, Warn, obs + "; the snapshotter is " + snap + ", which does not need it",
		"nothing to do unless you set the snapshotter to overlayfs"}
}

func (c *checker) devFuse(snap string) Row {
	const name = "dev-fuse"
	if snap != "fuse-overlayfs" {
		return Row{name, Pass, "not needed (snapshotter " + snap + ")", ""}
	}
	hint := "the fuse-overlayfs snapshotter needs /dev/fuse: create the node with --device /dev/fuse (kind does for rootless and Podman)"
	fi, err := c.sys.Stat("/dev/fuse")
	switch {
	case err != nil:
		return Row{name, Fail, "missing, and the snapshotter is fuse-overlayfs", hint}
	case c.live && fi.Mode()&fs.ModeCharDevice == 0:
		return Row{name, Fail, "/dev/fuse is not a character device (" + fi.Mode().Type().String() + ")", hint}
	}
	return Row{name, Pass, "present (snapshotter fuse-overlayfs)", ""}
}
