// Package mounts prepares the node's mount table for systemd and the
// kubelet: usable mount/umount binaries, a read-only /sys, shared mounts.
//
// It mounts through syscalls only, and never remounts the shared sysfs
// superblock: /sys is made read-only by a bind remount of the node's own
// mount.
package mounts
