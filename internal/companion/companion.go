package companion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/identity"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// ExitCode is the status of a companion command that fails.
const ExitCode = 1

// Command is one companion command.
type Command struct {
	Name string
	// Summary is one line for the usage text.
	Summary string
	// Steps returns the command's steps; stdin is its standard input (the
	// container state, for the OCI hook).
	Steps func(stdin io.Reader) []boot.Step
	// Run, when set, is what the command does instead of applying Steps
	// once: a command of rounds (etcd-peer-nat) whose Steps are its dry
	// run, one round.
	Run func(ctx context.Context, sys system.System, log *logline.Logger) error
}

// Commands lists the companion commands.
func Commands() []Command {
	return []Command{
		{
			Name:    "undo-mount-hacks",
			Summary: "cgroup v1: remove the bind over /proc/cgroups once systemd has read it",
			Steps:   one("undo-mount-hacks", undoMountHacks),
		},
		{
			Name:    "create-kubelet-cgroup-v2",
			Summary: "cgroup v2: delegate every controller to /kubelet and /kubelet.slice",
			Steps:   one("create-kubelet-cgroup-v2", createKubeletCgroupV2),
		},
		{
			Name:    "mount-product-files",
			Summary: "OCI createContainer hook: give the container the node's product_name and product_uuid",
			Steps:   one("mount-product-files", mountProductFiles),
		},
		{
			Name:    etcdpeers.Command,
			Summary: "HA control plane, as a runtime unit: DNAT etcd's peers from their recorded to their current addresses",
			Steps:   one(etcdpeers.Command, etcdPeerNATOnce),
			Run:     etcdPeerNAT,
		},
	}
}

// Lookup finds a companion command by name.
func Lookup(name string) (Command, bool) {
	for _, c := range Commands() {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// one is the Steps of a command of one step, p, which reads stdin when it
// needs it (the OCI hook's container state).
func one(name string, p func(context.Context, *boot.Host, io.Reader) ([]boot.Fact, []plan.Action, error)) func(io.Reader) []boot.Step {
	return func(stdin io.Reader) []boot.Step {
		return []boot.Step{{Name: name, Code: ExitCode, Plan: func(ctx context.Context, h *boot.Host) (boot.Planned, error) {
			facts, actions, err := p(ctx, h, stdin)
			return boot.Planned{Facts: facts, Actions: actions}, err
		}}}
	}
}

// ProcCgroups is where fix_cgroup binds /kind/fake-cgroups on cgroup v1.
const ProcCgroups = "/proc/cgroups"

// undoMountHacks removes the fake /proc/cgroups once systemd has started:
// it hid the misc controller from systemd, but the kubelet and cAdvisor
// must see the real file.
func undoMountHacks(_ context.Context, h *boot.Host, _ io.Reader) ([]boot.Fact, []plan.Action, error) {
	if h.State.CgroupV2 {
		return []boot.Fact{{Name: "cgroup", Value: "v2: nothing was bound"}}, nil, nil
	}
	bound := true // when the mount table cannot be read, try anyway
	if mi, err := system.ReadMountinfo(h.Sys); err == nil {
		bound = system.Top(mi, ProcCgroups) != nil
	}
	facts := []boot.Fact{{Name: ProcCgroups + " bound", Value: strconv.FormatBool(bound)}}
	if !bound {
		return facts, nil, nil
	}
	return facts, []plan.Action{plan.Unmount(ProcCgroups).OrIgnore().Because("systemd has read the fake; show the real one")}, nil
}

func createKubeletCgroupV2(_ context.Context, h *boot.Host, _ io.Reader) ([]boot.Fact, []plan.Action, error) {
	if !h.State.CgroupV2 {
		return nil, nil, errors.New("this node has cgroup v1 (no " + cgroupfix.ControllersFile + "): create-kubelet-cgroup-v2 is for cgroup v2 only")
	}
	f, err := cgroupfix.DetectKubeletCgroup(h.Sys)
	if err != nil {
		return nil, nil, err
	}
	facts := []boot.Fact{
		{Name: "controllers", Value: strings.Join(f.Controllers, " ")},
		{Name: "processes in the root cgroup", Value: strconv.Itoa(len(f.Procs))},
	}
	actions, err := cgroupfix.PlanKubeletCgroup(f)
	return facts, actions, err
}

// ProductFile is a /kind/product_* file to copy into a container.
type ProductFile struct {
	Name string // "product_name"
	Data []byte
	Mode fs.FileMode
}

// ProductBind is a DMI file of the node to hide in the container.
type ProductBind struct {
	DMI    string // the node path, /sys/class/dmi/id/product_uuid
	Source string // the copy in the container's root
	Target string // the DMI file in the container's root
	// Missing says why the bind cannot be made ("" when it can).
	Missing string
}

// ProductFacts is what mount-product-files needs.
type ProductFacts struct {
	Rootfs  string
	Files   []ProductFile
	Binds   []ProductBind
	Inherit system.MountFlags
}

// maxState bounds the container state read from stdin; it is a few hundred
// bytes.
const maxState = 1 << 20

// ParseState returns the bundle directory from the OCI container state
// (runtime-spec, runtime.md#state) a hook reads on stdin.
func ParseState(r io.Reader) (string, error) {
	var state struct {
		Bundle string `json:"bundle"`
	}
	if err := json.NewDecoder(io.LimitReader(r, maxState)).Decode(&state); err != nil {
		return "", fmt.Errorf("container state on stdin: %w", err)
	}
	switch {
	case state.Bundle == "":
		return "", errors.New("container state on stdin: no bundle")
	case !path.IsAbs(state.Bundle) || path.Clean(state.Bundle) == "/":
		return "", fmt.Errorf("container state on stdin: bundle %s is not an absolute directory", logline.QuoteClipped(state.Bundle))
	}
	return path.Clean(state.Bundle), nil
}

// dmiProducts are the DMI files bound, and the /kind file each shows.
var dmiProducts = []struct{ dmi, file string }{
	{identity.DMIProductName, "product_name"},
	{identity.DMIProductUUID, "product_uuid"},
	{identity.DMIVirtualProductUUID, "product_uuid"},
}

// MaxProductFiles bounds the /kind/product_* files copied into each
// container: kind writes two (product_name, product_uuid), and the plan
// holds each one's content, so a /kind of thousands of them was that many
// files in the hook's memory. More is an error that names the
// directory: the node is not one kind made.
const MaxProductFiles = 16

// DetectProductFiles reads the facts for the container in bundle.
func DetectProductFiles(sys system.System, bundle string) (ProductFacts, error) {
	f := ProductFacts{Rootfs: path.Join(bundle, "rootfs")}
	entries, err := sys.ReadDir("/kind")
	if err != nil && !system.NotExist(err) {
		return f, err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "product_") {
			continue
		}
		p := "/kind/" + e.Name()
		fi, err := sys.Stat(p)
		if err != nil {
			return f, err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if len(f.Files) == MaxProductFiles {
			return f, fmt.Errorf("/kind holds more than %d product_* files", MaxProductFiles)
		}
		b, err := sys.ReadFile(p, system.LimitValue)
		if err != nil {
			return f, err
		}
		f.Files = append(f.Files, ProductFile{Name: e.Name(), Data: b, Mode: fi.Mode().Perm()})
	}
	for _, d := range dmiProducts {
		fi, err := sys.Stat(d.dmi)
		if err != nil || !fi.Mode().IsRegular() {
			continue // the node has no such DMI file: nothing to hide
		}
		b := ProductBind{DMI: d.dmi, Source: path.Join(f.Rootfs, d.file), Target: path.Join(f.Rootfs, d.dmi)}
		if !slices.ContainsFunc(f.Files, func(p ProductFile) bool { return p.Name == d.file }) {
			b.Missing = "/kind/" + d.file + " does not exist"
		} else if _, err := sys.Stat(b.Target); err != nil {
			b.Missing = err.Error()
		}
		f.Binds = append(f.Binds, b)
	}
	if mi, err := system.ReadMountinfo(sys); err == nil {
		f.Inherit = identity.InheritedFlags(mi, f.Rootfs+"/product_name")
	}
	return f, nil
}

// PlanProductFiles copies the node's product files into the container and
// binds them over its DMI files. Each container gets its own copy: all
// containers bound to one file shared its mount, which made reading it slow
// enough to time containers out (the reason for kind's hook).
func PlanProductFiles(f ProductFacts) []plan.Action {
	var actions []plan.Action
	for _, p := range f.Files {
		actions = append(actions, plan.WriteFile(path.Join(f.Rootfs, p.Name), p.Data, p.Mode))
	}
	for _, b := range f.Binds {
		if b.Missing != "" {
			// A failing hook fails the container: skip, and say why.
			actions = append(actions, plan.Warning(fmt.Sprintf("not hiding %s in the container: %s", b.DMI, b.Missing)))
			continue
		}
		actions = append(actions, identity.BindReadOnly(b.Source, b.Target, f.Inherit)...)
	}
	return actions
}

func mountProductFiles(_ context.Context, h *boot.Host, stdin io.Reader) ([]boot.Fact, []plan.Action, error) {
	if stdin == nil {
		return nil, nil, errors.New("no container state on stdin")
	}
	bundle, err := ParseState(stdin)
	if err != nil {
		return nil, nil, err
	}
	f, err := DetectProductFiles(h.Sys, bundle)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, p := range f.Files {
		names = append(names, p.Name)
	}
	facts := []boot.Fact{{Name: "bundle", Value: bundle}, {Name: "product files", Value: strings.Join(names, " ")}}
	return facts, PlanProductFiles(f), nil
}
