package network

import (
	"context"
	"fmt"
	"slices"
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

// The caps on one iptables-save's output. A node at boot holds a few
// dozen rules, and a busy host's kube-proxy a few hundred thousand; at
// both caps every command stays within its budget (docs/performance.md).
const (
	// MaxSaveBytes is the most a save may print: system.Run refuses a
	// longer output with an error naming the command.
	MaxSaveBytes = system.LimitOutput
	// MaxSaveRules is the most rule lines a save may hold (CountRules).
	MaxSaveRules = 1 << 20
)

// runSave runs command, an iptables-save, within the caps on its output
// (more than MaxSaveRules rule lines is refused); out is nil when it
// failed.
func runSave(ctx context.Context, sys system.System, command string, timeout time.Duration) (out []byte, rules int, err error) {
	if out, _, err = sys.Run(ctx, []string{command}, nil, timeout); err != nil {
		return nil, 0, err
	}
	if rules = CountRules(out); rules > MaxSaveRules {
		return nil, 0, fmt.Errorf("%s: %d rule lines, more than the cap of %d (MaxSaveRules)", command, rules, MaxSaveRules)
	}
	return out, rules, nil
}

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
	// Native is the native nftables ruleset, read when no save holds
	// Docker's DNS rules.
	Native NativeFacts
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

// DetectIptables counts the rules each backend holds, on the saves p
// started (or starts now: the four run concurrently), and reads the
// alternatives.
func (p *Probes) DetectIptables(ctx context.Context) (IptablesFacts, error) {
	f := IptablesFacts{Links: map[string]string{}}
	for _, name := range Alternatives {
		// Not a link, or none: update-alternatives sets it.
		f.Links[name], _ = p.sys.Readlink(AlternativesDir + "/" + name)
	}
	p.StartSaves(ctx)
	<-p.savesDone
	f.Saves, f.Native = p.saves, p.native
	return f, p.savesErr
}

// SavedRules returns what m's iptables-save printed (or why it failed),
// and false when it was not run.
func (f IptablesFacts) SavedRules(m Mode) (out []byte, err error, ok bool) {
	i := slices.IndexFunc(f.Saves, func(s Save) bool { return s.Command == m.SaveCommand() })
	if i < 0 {
		return nil, nil, false
	}
	return f.Saves[i].Output, f.Saves[i].Err, true
}

// Failed lists the saves that were run and failed (their rules count
// 0), one "COMMAND: ERROR" each, naming the command once.
func (f IptablesFacts) Failed() []string {
	var failed []string
	for _, s := range f.Saves {
		if s.Err == nil {
			continue
		}
		msg := s.Err.Error()
		if !strings.HasPrefix(msg, s.Command+":") && !strings.HasPrefix(msg, s.Command+" ") {
			msg = s.Command + ": " + msg
		}
		failed = append(failed, msg)
	}
	return failed
}

// LookedAt lists every place looked in for Docker's DNS rules: each
// save, with its count or failure, and the native ruleset.
func (f IptablesFacts) LookedAt() string {
	var parts []string
	for _, s := range f.Saves {
		switch {
		case s.NotRun != "":
			parts = append(parts, fmt.Sprintf("%s not run (%s)", s.Command, s.NotRun))
		case s.Err != nil:
			parts = append(parts, s.Command+" failed")
		default:
			parts = append(parts, fmt.Sprintf("%s %d rules", s.Command, s.Rules))
		}
	}
	return strings.Join(append(parts, "native nftables: "+f.Native.Describe()), ", ")
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
// kubernetes-sigs/iptables-wrappers decides, unless Docker's DNS redirect
// is native nftables: that engine writes nftables, so nft breaks the tie
// and kube-proxy's rules share the kernel's nftables with Docker's.
func (f IptablesFacts) Mode() Mode {
	legacy, nft := f.Counts()
	if _, native := f.Native.Docker(); legacy > nft || (legacy == nft && !native) {
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
	var actions []plan.Action
	// The reference counts a save that fails as no rules, and so does
	// the mode; but a backend that cannot be read may be the one Docker
	// writes to, and the choice then points the wrong way: the live log
	// says so, where step 10's error can be traced to it.
	for _, failed := range f.Failed() {
		actions = append(actions, plan.Warning(failed+" (its rules count as 0)"))
	}
	if legacy, nft := f.Counts(); legacy == nft && mode == NFT {
		d, _ := f.Native.Docker()
		actions = append(actions, plan.Info(fmt.Sprintf(
			"Docker's DNS redirect is native nftables (table ip %s): the tie of %d rules goes to nft, where Docker's rules are", d.Table, nft)))
	}
	actions = append(actions, plan.Info("setting iptables to detected mode: "+string(mode)))
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
