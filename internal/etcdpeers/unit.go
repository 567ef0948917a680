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

// Unit is the unit running exe's etcd-peer-nat. No Restart: the command
// bounds its own time (Deadline), and RuntimeMaxSec and MemoryMax bound
// it again from outside; multi-user.target (which Wants it) and the
// kubelet wait only for the exec, never for the mapping.
func Unit(exe string) plan.RuntimeUnit {
	return plan.RuntimeUnit{
		Name:          UnitName,
		Description:   "DNAT etcd's peers from recorded to current addresses (kind#1689)",
		Exec:          []string{exe, Command},
		MemoryMax:     "64M",
		RuntimeMaxSec: "900",
	}
}
