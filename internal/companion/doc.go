// Package companion holds the node's other scripts as commands of the one
// binary: kind's image runs them once systemd is up (undo-mount-hacks,
// create-kubelet-cgroup-v2) or as containerd's createContainer hook
// (mount-product-files), or a runtime unit runs them (etcd-peer-nat:
// its rounds are etcdpeers.Watch, its dry run one round). Each is one step, detected, planned and applied
// like the entrypoint's own (so --dry-run works for them too).
//
// It holds no logic a step package owns: what it knows of cgroups is
// cgroupfix's, of DMI files identity's.
package companion
