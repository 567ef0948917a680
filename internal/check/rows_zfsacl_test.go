package check

import (
	"strings"
	"testing"
)

// TestZFSACLRow: a rootless node whose containerd directory is on a ZFS
// dataset without POSIX ACLs (kind #4025, PR #4225).
func TestZFSACLRow(t *testing.T) {
	superOptions := func(opts string) func(t *testing.T, dir string) {
		return editMount("/var", func(l string) string {
			return strings.Replace(l, "rw,xattr,noacl", opts, 1)
		})
	}
	runRowCases(t, []rowCase{
		{
			name: "acltype=off", host: "rootless-zfs-noacl",
			want: map[string]string{"zfs-acl": "warn:^/var/lib/containerd is on the zfs dataset tank/home \\(mounted at /var\\), super options rw,xattr,noacl: no POSIX ACLs$"},
			exit: ExitWarn,
		},
		{
			// Older OpenZFS lists nothing when acltype=off.
			name: "acltype=off, not listed", host: "rootless-zfs-noacl", change: superOptions("rw,xattr"),
			want: map[string]string{"zfs-acl": "warn:super options rw,xattr: no POSIX ACLs$"},
			exit: ExitWarn,
		},
		{
			name: "acltype=posixacl", host: "rootless-zfs-noacl", change: superOptions("rw,xattr,posixacl"),
			want: map[string]string{"zfs-acl": "pass:super options rw,xattr,posixacl$"},
			exit: ExitPass,
		},
		{
			name: "a longer option is not posixacl", host: "rootless-zfs-noacl", change: superOptions("rw,noposixacl"),
			want: map[string]string{"zfs-acl": "warn:no POSIX ACLs$"},
			exit: ExitWarn,
		},
		{
			name: "rootless on ext4", host: "rootless-v2-delegated",
			want: map[string]string{"zfs-acl": "pass:^/var/lib/containerd is on ext4 \\(mounted at /var\\)$"},
			exit: ExitPass,
		},
		{
			// Rootful: the kernel's overlayfs, whatever the dataset.
			name: "not rootless", host: "zfs",
			want: map[string]string{"zfs-acl": "pass:^not rootless"},
			exit: ExitWarn, // fs-kind: /kind on zfs
		},
	})
}
