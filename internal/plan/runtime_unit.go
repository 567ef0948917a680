package plan

// This file holds RuntimeUnit: a systemd unit the entrypoint writes under
// /run/systemd/system before init, with its multi-user.target.wants link,
// for a helper that runs once systemd is up as a companion command of this
// binary (etcd-peer-nat, dns-forwarder). Every such helper renders,
// detects and installs its unit here, so that all of them run the same
// binary and fail the same way.

import (
	"io"
	"path"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

const (
	// RuntimeUnitDir is where systemd reads units made at run time: a
	// tmpfs, new on every start of a kind node.
	RuntimeUnitDir = "/run/systemd/system"
	// runtimeWanted is the target that pulls the units in, with no
	// `systemctl enable`.
	runtimeWanted = "multi-user.target"
	// DefaultExecutable is where kind's node image has the binary: what a
	// unit runs when the path of the binary that will boot is unknown (a
	// dry run, a check). A real boot runs os.Executable's path, so that
	// an image whose binary is only at /entrypoint gets units that start.
	DefaultExecutable = "/usr/local/bin/entrypoint"
)

// RuntimeUnit is a service running a companion command of this binary.
// It is Type=exec and never orders itself before anything: the kubelet
// starts whether or not it runs. Its bounds are each helper's own.
type RuntimeUnit struct {
	Name        string // "kind-dns-forwarder.service"
	Description string
	// Exec is ExecStart's argv, the binary first; none of it holds a
	// blank or a quote (paths, commands, addresses, flags).
	Exec []string
	// MemoryMax bounds its memory ("64M"); always set.
	MemoryMax string
	// TasksMax bounds its threads; "" leaves systemd's default.
	TasksMax string
	// RuntimeMaxSec stops it after that long ("900"); "" for a service
	// that runs as long as the node.
	RuntimeMaxSec string
	// Restart restarts it on failure, after 2 s, at most 5 starts a
	// minute: a helper that cannot run is given up on, and logs why each
	// time.
	Restart bool
}

// Path is the unit file.
func (u RuntimeUnit) Path() string { return path.Join(RuntimeUnitDir, u.Name) }

// WantsDir holds the wants links of the runtime units.
func WantsDir() string { return path.Join(RuntimeUnitDir, runtimeWanted+".wants") }

// WantsLink is the link that makes multi-user.target pull the unit in.
func (u RuntimeUnit) WantsLink() string { return path.Join(WantsDir(), u.Name) }

// linkTarget is what WantsLink points at.
func (u RuntimeUnit) linkTarget() string { return "../" + u.Name }

// CommandLine is ExecStart's value.
func (u RuntimeUnit) CommandLine() string { return strings.Join(u.Exec, " ") }

// Render is the unit file.
func (u RuntimeUnit) Render() []byte {
	opt := unit.NewUnitOption
	opts := []*unit.UnitOption{opt("Unit", "Description", u.Description)}
	if u.Restart {
		opts = append(opts, opt("Unit", "StartLimitIntervalSec", "60"), opt("Unit", "StartLimitBurst", "5"))
	}
	opts = append(opts, opt("Service", "Type", "exec"), opt("Service", "ExecStart", u.CommandLine()))
	if u.Restart {
		opts = append(opts, opt("Service", "Restart", "on-failure"), opt("Service", "RestartSec", "2"))
	}
	if u.RuntimeMaxSec != "" {
		opts = append(opts, opt("Service", "RuntimeMaxSec", u.RuntimeMaxSec))
	}
	opts = append(opts, opt("Service", "MemoryMax", u.MemoryMax))
	if u.TasksMax != "" {
		opts = append(opts, opt("Service", "TasksMax", u.TasksMax))
	}
	opts = append(opts, opt("Install", "WantedBy", runtimeWanted))
	b, _ := io.ReadAll(unit.Serialize(opts)) // a bytes.Buffer: cannot fail
	return b
}

// Installed is what an earlier run left of a unit: its file (nil when
// missing or unreadable) and where its wants link points (nil when there
// is none, "" when something there is not a link).
type Installed struct {
	Unit []byte
	Link *string
}

// Installed reads what is there of u now. Nothing it finds is an error:
// whatever cannot be read is written anew, and a failure to write warns.
func (u RuntimeUnit) Installed(sys system.System) Installed {
	var in Installed
	if b, err := sys.ReadFile(u.Path(), system.LimitConfig); err == nil {
		in.Unit = b
	}
	if _, err := sys.Lstat(u.WantsLink()); err == nil {
		target, _ := sys.Readlink(u.WantsLink())
		in.Link = &target
	}
	return in
}

// Install installs u over what is there: the wants directory, the unit
// file when its content differs, the link when it is missing or points
// elsewhere. A tree where u is installed gets no action. Every failure
// only warns: a helper beyond what the script did must never stop the
// boot (the node then boots as the script's would). why is the write's
// reason, for --dry-run.
func (u RuntimeUnit) Install(in Installed, why string) []Action {
	content := u.Render()
	write := string(in.Unit) != string(content)
	linked := in.Link != nil && *in.Link == u.linkTarget()
	if !write && linked {
		return nil
	}
	// /run starts empty: systemd makes its directories only later.
	out := []Action{Mkdir(WantsDir(), 0o755).OrWarn("failed to create " + WantsDir())}
	if write {
		out = append(out, WriteFile(u.Path(), content, 0o644).ShownWhole().Because(why).OrWarn("failed to write "+u.Path()))
	}
	if !linked {
		if in.Link != nil {
			out = append(out, Remove(u.WantsLink()).OrWarn("failed to remove "+u.WantsLink()))
		}
		out = append(out, Symlink(u.linkTarget(), u.WantsLink()).Because("started with "+runtimeWanted+", never waited for").OrWarn("failed to enable "+u.Name))
	}
	return out
}
