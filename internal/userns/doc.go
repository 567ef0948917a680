// Package userns detects a user namespace (rootless Docker or Podman) and
// validates what a node needs there: enough file descriptors and the cgroup
// controllers the kubelet uses.
//
// Every read goes through system.System (moby/sys/userns caches a fixed
// host path), so replays see the replayed host.
package userns
