package network

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Timeouts of the commands steps 9 and 10 run.
const (
	// ProbeTimeout limits each read-only probe: an iptables-save, a name
	// lookup. A probe that times out counts as failed.
	ProbeTimeout = 5 * time.Second
	// CommandTimeout limits a command that changes state
	// (update-alternatives, iptables-restore).
	CommandTimeout = 10 * time.Second
	// KubeadmTimeout limits the certificate renewal; kubeadm generates an
	// RSA key, which takes seconds on a loaded machine.
	KubeadmTimeout = 60 * time.Second
)

// Mode is an iptables backend.
type Mode string

const (
	Legacy Mode = "legacy"
	NFT    Mode = "nft"
)

// SaveCommand is the backend's own iptables-save. Steps name the backend's
// tools rather than the iptables-save alternative, so that what they read and
// write does not depend on the alternatives having been switched (a dry run
// never switches them).
func (m Mode) SaveCommand() string { return "iptables-" + string(m) + "-save" }

// RestoreCommand is the backend's own iptables-restore.
func (m Mode) RestoreCommand() string { return "iptables-" + string(m) + "-restore" }

// Alternatives are the Debian alternatives select_iptables points at a
// backend, and where each one's link lives.
var Alternatives = []string{"iptables", "ip6tables"}

// AlternativesDir holds the alternatives' links.
const AlternativesDir = "/etc/alternatives"

// AlternativeTarget is the binary an alternative must point at for mode.
func AlternativeTarget(name string, m Mode) string { return "/usr/sbin/" + name + "-" + string(m) }

// Save is one iptables-save probe.
type Save struct {
	Command string
	Mode    Mode
	Output  []byte
	Rules   int   // rule lines; 0 when the command failed
	Err     error // why the command failed
	// NotRun, when set, says why the command was not run: its answer is
	// known without it (no rules).
	NotRun string
}

// IptablesFacts is what select_iptables needs.
type IptablesFacts struct {
	// Saves are the legacy and nft saves of both families.
	Saves []Save
	// Links are the alternatives' current targets ("" when unset).
	Links map[string]string
}

// saveCommands are the probes, in the order they are reported. tables,
// for a legacy save, is where the kernel lists the legacy tables of this
// network namespace: all that save prints.
var saveCommands = []struct {
	name   string
	mode   Mode
	tables string
}{
	{"iptables-legacy-save", Legacy, "/proc/net/ip_tables_names"},
	{"ip6tables-legacy-save", Legacy, "/proc/net/ip6_tables_names"},
	{"iptables-nft-save", NFT, ""},
	{"ip6tables-nft-save", NFT, ""},
}

// DetectIptables counts the rules each backend holds (the four saves run
// concurrently, see Probes) and reads the alternatives.
func DetectIptables(ctx context.Context, sys system.System, timeout time.Duration) (IptablesFacts, error) {
	return NewProbes(sys, timeout).DetectIptables(ctx)
}

// DetectIptables is the package's DetectIptables on the saves p started
// (or starts now).
func (p *Probes) DetectIptables(ctx context.Context) (IptablesFacts, error) {
	f := IptablesFacts{Links: map[string]string{}}
	for _, name := range Alternatives {
		// Not a link, or none: update-alternatives sets it.
		f.Links[name], _ = p.sys.Readlink(AlternativesDir + "/" + name)
	}
	var err error
	f.Saves, err = p.waitSaves(ctx)
	return f, err
}

// SavedRules returns what m's iptables-save printed (or why it failed),
// and false when it was not run.
func (f IptablesFacts) SavedRules(m Mode) (out []byte, err error, ok bool) {
	for _, s := range f.Saves {
		if s.Command == m.SaveCommand() {
			return s.Output, s.Err, true
		}
	}
	return nil, nil, false
}

// Counts sums the rule lines of each backend; a failed save counts 0.
func (f IptablesFacts) Counts() (legacy, nft int) {
	for _, s := range f.Saves {
		switch s.Mode {
		case Legacy:
			legacy += s.Rules
		case NFT:
			nft += s.Rules
		}
	}
	return legacy, nft
}

// Mode is the backend the host uses: the one holding more rules (the host's
// Docker, kube-proxy and firewall write to one of them); legacy on a tie, as
// kubernetes-sigs/iptables-wrappers decides.
func (f IptablesFacts) Mode() Mode {
	legacy, nft := f.Counts()
	if legacy >= nft {
		return Legacy
	}
	return NFT
}

// Describe summarises each backend's count for --dry-run.
func (f IptablesFacts) Describe(m Mode) string {
	total := 0
	var parts []string
	for _, s := range f.Saves {
		if s.Mode != m {
			continue
		}
		total += s.Rules
		if s.NotRun != "" {
			parts = append(parts, fmt.Sprintf("%s not run: %s", s.Command, s.NotRun))
		} else if s.Err != nil {
			parts = append(parts, fmt.Sprintf("%s failed: %v", s.Command, s.Err))
		} else {
			parts = append(parts, fmt.Sprintf("%s %d", s.Command, s.Rules))
		}
	}
	return fmt.Sprintf("%d rules (%s)", total, strings.Join(parts, "; "))
}

// PlanIptables points the alternatives at the detected backend, so that the
// node's iptables (kube-proxy, CNI plugins) writes where the host's rules
// are. An alternative already pointing there is left alone.
func PlanIptables(f IptablesFacts) []plan.Action {
	mode := f.Mode()
	actions := []plan.Action{plan.Info("setting iptables to detected mode: " + string(mode))}
	for _, name := range Alternatives {
		target := AlternativeTarget(name, mode)
		if f.Links[name] == target {
			continue
		}
		// Its "using ... in manual mode" line is noise, as the script
		// decided (>/dev/null); what it says on standard error is logged.
		actions = append(actions, plan.Run([]string{"update-alternatives", "--set", name, target}, nil, CommandTimeout).WithoutStdout())
	}
	return actions
}
