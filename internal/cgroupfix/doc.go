// Package cgroupfix prepares the node's cgroups for systemd and the kubelet.
//
// On cgroup v2 nothing is needed before init (the kubelet's cgroup is made
// once systemd has moved every process out of the root cgroup: see the
// create-kubelet-cgroup-v2 command). On v1 the kubelet gets its own cgroup
// roots, /kubelet and /kubelet.slice, in every hierarchy, and without a
// cgroup namespace the container's cgroup mounts are made to look like the
// host's again.
//
// Every read goes through system.System, so replays and captures see the
// same host; containerd/cgroups is used only for its reader-based parser:
// its Mode() and managers read fixed host paths (and Mode() caches its
// answer), which a --root replay or a capture cannot redirect.
package cgroupfix
