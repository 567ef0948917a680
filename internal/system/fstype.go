package system

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// fsMagicNames names statfs(2) f_type values the way coreutils' `stat -f -c %T`
// does, because the reference entrypoint compared those names. Note that
// coreutils calls every FUSE filesystem "fuseblk": they share one magic.
var fsMagicNames = map[int64]string{
	0x2fc12fc1:                 "zfs", // not in x/sys/unix
	unix.FUSE_SUPER_MAGIC:      "fuseblk",
	unix.OVERLAYFS_SUPER_MAGIC: "overlayfs",
	unix.EXT4_SUPER_MAGIC:      "ext2/ext3",
	unix.BTRFS_SUPER_MAGIC:     "btrfs",
	unix.XFS_SUPER_MAGIC:       "xfs",
	unix.TMPFS_MAGIC:           "tmpfs",
	unix.SYSFS_MAGIC:           "sysfs",
	unix.PROC_SUPER_MAGIC:      "proc",
	unix.CGROUP_SUPER_MAGIC:    "cgroupfs",
	unix.CGROUP2_SUPER_MAGIC:   "cgroup2fs",
	0x61756673:                 "aufs",
	unix.V9FS_MAGIC:            "v9fs",
	0x6e667364:                 "nfsd",
	unix.NFS_SUPER_MAGIC:       "nfs",
}

// FSTypeName names a statfs magic number; unknown ones print in hex as
// coreutils does.
func FSTypeName(magic int64) string {
	if n, ok := fsMagicNames[magic]; ok {
		return n
	}
	return fmt.Sprintf("UNKNOWN (%#x)", uint64(magic))
}

// FSTypeFromMountinfo names the filesystem of a mountinfo fstype field the
// way statfs would, so that a captured tree needs no separate statfs answers.
func FSTypeFromMountinfo(fstype string) string {
	switch {
	case fstype == "overlay":
		return "overlayfs"
	case fstype == "ext4" || fstype == "ext3" || fstype == "ext2":
		return "ext2/ext3"
	case fstype == "fuse" || fstype == "fuseblk" || strings.HasPrefix(fstype, "fuse."):
		return "fuseblk"
	case fstype == "cgroup":
		return "cgroupfs"
	case fstype == "cgroup2":
		return "cgroup2fs"
	case fstype == "9p":
		return "v9fs"
	}
	return fstype
}
