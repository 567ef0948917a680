package network

// This file holds the rendering of a runtime unit: a systemd unit the
// entrypoint writes under /run/systemd/system, before init, for a helper
// that runs once systemd is up (the DNS forwarder). It is kept apart so
// that every such helper renders and installs its unit the same way.

import (
	"io"
	"path"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// Where runtime units go, and the target that pulls them in.
const (
	RuntimeUnitDir = "/run/systemd/system"
	runtimeWanted  = "multi-user.target"
	// EntrypointBinary is where kind's node image keeps its entrypoint,
	// and so this binary in an image that swaps it in.
	EntrypointBinary = "/usr/local/bin/entrypoint"
)

// RuntimeUnit is a service that runs a companion command of this binary.
// It never orders itself before anything (the kubelet starts whether or
// not it runs), restarts on failure a bounded number of times, and is
// held to MemoryMax and TasksMax.
type RuntimeUnit struct {
	Name        string // "kind-dns-forwarder.service"
	Description string
	// Args follow EntrypointBinary on its ExecStart line; none holds a
	// blank or a quote (addresses, flags).
	Args      []string
	MemoryMax string // "32M"
	TasksMax  string
}

// Path is the unit file.
func (u RuntimeUnit) Path() string { return path.Join(RuntimeUnitDir, u.Name) }

// WantsLink is the link that makes multi-user.target pull the unit in
// with no `systemctl enable`: /run is a fresh tmpfs on every start of a
// kind node, so it is written on every boot.
func (u RuntimeUnit) WantsLink() string {
	return path.Join(RuntimeUnitDir, runtimeWanted+".wants", u.Name)
}

// Render is the unit file.
func (u RuntimeUnit) Render() []byte {
	opt := unit.NewUnitOption
	opts := []*unit.UnitOption{
		opt("Unit", "Description", u.Description),
		// At most 5 starts a minute: a helper that cannot run is
		// given up on, and logs why each time.
		opt("Unit", "StartLimitIntervalSec", "60"),
		opt("Unit", "StartLimitBurst", "5"),
		opt("Service", "Type", "exec"),
		opt("Service", "ExecStart", strings.Join(append([]string{EntrypointBinary}, u.Args...), " ")),
		opt("Service", "Restart", "on-failure"),
		opt("Service", "RestartSec", "2"),
		opt("Service", "MemoryMax", u.MemoryMax),
		opt("Service", "TasksMax", u.TasksMax),
		opt("Install", "WantedBy", runtimeWanted),
	}
	// A bytes.Buffer: reading it cannot fail.
	b, _ := io.ReadAll(unit.Serialize(opts))
	return b
}

// Plan installs the unit: the file, and the wants link unless link (what
// the link points at now, nil when there is none) already names it.
func (u RuntimeUnit) Plan(link *string) []plan.Action {
	target := "../" + u.Name
	// Both on every boot: /run starts empty on each start of a kind
	// node, and the unit names this boot's addresses.
	actions := []plan.Action{
		plan.Mkdir(path.Dir(u.WantsLink()), 0o755).OnEveryBoot(),
		plan.WriteFile(u.Path(), u.Render(), 0o644).OnEveryBoot().ShownWhole(),
	}
	switch {
	case link == nil:
		actions = append(actions, plan.Symlink(target, u.WantsLink()))
	case *link != target:
		actions = append(actions, plan.Remove(u.WantsLink()), plan.Symlink(target, u.WantsLink()))
	}
	return actions
}
