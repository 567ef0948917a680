package etcdpeers

// This file holds Plan: on a control plane whose etcd has two or more
// members, the peers file, the unit and its wants link.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// Config is PeersFile: what etcd-peer-nat maps.
type Config struct {
	// Iptables is the backend select_iptables chose ("legacy", "nft").
	Iptables string `json:"iptables"`
	// Self is this node's member name, for the log.
	Self  string `json:"self"`
	Peers []Peer `json:"peers"`
}

// Peer is one peer: the name that resolves to its current address, and
// the URLs etcd recorded for it.
type Peer struct {
	Name     string   `json:"name"`
	PeerURLs []string `json:"peerURLs"`
}

// Describe is the membership for --dry-run, and the unit Plan would
// install (exe's).
func (f Facts) Describe(exe string) [][2]string {
	if !f.Present {
		return nil
	}
	if f.Err != nil {
		return [][2]string{{"etcd members", "unreadable: " + f.Err.Error()}}
	}
	var parts []string
	for _, m := range f.Members {
		s := fmt.Sprintf("%s %s", nameOf(m), strings.Join(m.PeerURLs, ","))
		if m.Learner {
			s += " (learner)"
		}
		if m.Name == f.Hostname {
			s += " (this node)"
		}
		parts = append(parts, s)
	}
	out := [][2]string{{"etcd members", fmt.Sprintf("%d: %s", len(f.Members), strings.Join(parts, "; "))}}
	if len(f.Members) >= 2 {
		u := Unit(exe)
		out = append(out, [2]string{u.Path(), string(u.Render())})
	}
	return out
}

func nameOf(m Member) string {
	if m.Name == "" {
		return fmt.Sprintf("(unnamed %x)", m.ID)
	}
	return m.Name
}

// Plan installs the unit on a control plane whose etcd has two or more
// members; elsewhere (a worker, a single control plane, a first boot
// before kubeadm) it plans nothing. iptables is step 9's backend, exe
// the binary the unit runs.
func Plan(f Facts, iptables, exe string) []plan.Action {
	cfg, out := Redirect(f, iptables)
	if len(cfg.Peers) == 0 {
		return out
	}
	peers, _ := json.MarshalIndent(cfg, "", "  ") // strings only: cannot fail
	peers = append(peers, '\n')
	names := make([]string, len(cfg.Peers))
	for i, p := range cfg.Peers {
		names[i] = p.Name
	}
	out = append(out, plan.Info(fmt.Sprintf("etcd has %d members: %s will redirect connections to %s from their recorded to their current addresses", len(f.Members), UnitName, strings.Join(names, ", "))))
	if !bytes.Equal(f.Peers, peers) {
		out = append(out, plan.WriteFile(PeersFile, peers, 0o644).Because("etcd's peers as recorded, for "+UnitName).OrWarn("failed to write "+PeersFile))
	}
	return append(out, Unit(exe).Install(f.Installed, "etcd's peers may have new addresses (kind#1689)")...)
}

// Redirect is what Plan makes of f's membership: the peers file, whose
// Peers the unit redirects (none: Plan installs no unit), and the log
// lines Plan says of what it leaves out (a membership it cannot read,
// members without a name to look up, this node not a member). check's
// etcd-peers row reads it too, so that the row says what the plan does.
func Redirect(f Facts, iptables string) (Config, []plan.Action) {
	cfg := Config{Iptables: iptables, Self: f.Hostname}
	switch {
	case !f.Present:
		return cfg, nil
	case f.Err != nil:
		return cfg, []plan.Action{plan.Warning(fmt.Sprintf("not redirecting etcd's peers after a restart: %v", f.Err))}
	case len(f.Members) < 2:
		return cfg, nil
	}
	var out []plan.Action
	self := false
	for _, m := range f.Members {
		switch {
		case m.Name == f.Hostname:
			self = true
		case !validName(m.Name):
			out = append(out, plan.Info(fmt.Sprintf("etcd member %s (%s) has no name a resolver can look up: not redirected", nameOf(m), strings.Join(m.PeerURLs, ","))))
		default:
			cfg.Peers = append(cfg.Peers, Peer{Name: m.Name, PeerURLs: m.PeerURLs})
		}
	}
	if !self {
		cfg.Peers = nil
		return cfg, append(out, plan.Warning(fmt.Sprintf("not redirecting etcd's peers after a restart: no member of %s is named %q, this node", f.DB, f.Hostname)))
	}
	return cfg, out
}
