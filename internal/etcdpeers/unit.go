package etcdpeers

// This file holds the runtime unit that runs `entrypoint etcd-peer-nat`
// (a plan.RuntimeUnit): written into /run/systemd/system with its wants
// link, so that an image that only swaps the ENTRYPOINT gets it, and gone
// with /run at the next start.

import "github.com/kind-entrypoint/entrypoint/internal/plan"

const (
	// UnitName is the unit that redirects etcd's peers.
	UnitName = "kind-etcd-peer-nat.service"
	// UnitPath is the unit file.
	UnitPath = plan.RuntimeUnitDir + "/" + UnitName
	// Command is the companion command the unit runs.
	Command = "etcd-peer-nat"
)

// Unit is the unit running exe's etcd-peer-nat, as long as the node
// runs: a control plane restarted alone comes back at a new address at
// any time, and every other control plane must follow it. Type=exec
// with no ordering (plan.RuntimeUnit): multi-user.target, which Wants
// it, and the kubelet wait only for the exec, never for the mapping.
// Restarted on failure (an unreadable peers file, a crash, MemoryMax
// reached) at most 5 times a minute: a restart probes the jump the
// last run left and writes its chains anew. MemoryMax and TasksMax
// bound it from outside; the command bounds its own memory (Watcher).
func Unit(exe string) plan.RuntimeUnit {
	return plan.RuntimeUnit{
		Name:        UnitName,
		Description: "DNAT etcd's peers from recorded to current addresses (kind#1689)",
		Exec:        []string{exe, Command},
		MemoryMax:   "64M",
		TasksMax:    "64",
		Restart:     true,
	}
}
