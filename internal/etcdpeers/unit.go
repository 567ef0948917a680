package etcdpeers

// This file holds the runtime unit that runs `entrypoint etcd-peer-nat`:
// written into /run/systemd/system with its wants link, so that an image
// that only swaps the ENTRYPOINT gets it, and gone with /run at the next
// start.

import (
	"io"
	"path"

	"github.com/coreos/go-systemd/v22/unit"
)

const (
	// RuntimeUnitDir is where systemd reads units made at run time.
	RuntimeUnitDir = "/run/systemd/system"
	// UnitName is the unit that redirects etcd's peers.
	UnitName = "kind-etcd-peer-nat.service"
	// WantsDir holds the link that starts it with multi-user.target.
	WantsDir = RuntimeUnitDir + "/multi-user.target.wants"
	// Command is the companion command the unit runs.
	Command = "etcd-peer-nat"
	// DefaultExecutable is where kind's image has the binary, for a dry
	// run (which cannot know the path of the binary that will boot).
	DefaultExecutable = "/usr/local/bin/entrypoint"
)

// UnitPath and LinkPath are the unit file and its wants link.
var (
	UnitPath = path.Join(RuntimeUnitDir, UnitName)
	LinkPath = path.Join(WantsDir, UnitName)
)

// Unit is the unit file running exe's etcd-peer-nat. Type=exec, and no
// Before=: multi-user.target (which Wants it, and so is ordered after
// it) and the kubelet wait only for the exec, never for the mapping; the
// command bounds its own time (Deadline), RuntimeMaxSec and MemoryMax
// bound it again from outside.
func Unit(exe string) []byte {
	opts := []*unit.UnitOption{
		unit.NewUnitOption("Unit", "Description", "DNAT etcd's peers from recorded to current addresses (kind#1689)"),
		unit.NewUnitOption("Service", "Type", "exec"),
		unit.NewUnitOption("Service", "ExecStart", exe+" "+Command),
		unit.NewUnitOption("Service", "RuntimeMaxSec", "900"),
		unit.NewUnitOption("Service", "MemoryMax", "64M"),
		unit.NewUnitOption("Install", "WantedBy", "multi-user.target"),
	}
	b, _ := io.ReadAll(unit.Serialize(opts)) // a bytes.Reader: cannot fail
	return b
}
