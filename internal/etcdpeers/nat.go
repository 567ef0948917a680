package etcdpeers

// This file holds one round of etcd-peer-nat: resolve the peers not yet
// settled, and plan the DNAT rules of the mappings found.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

const (
	// Chain is the nat chain of the redirects, jumped to from OUTPUT:
	// etcd runs in the node's network namespace, so its connections to
	// peers are the node's own.
	Chain = "KIND-ETCD-PEERS"
	// LookupTimeout bounds one lookup of a peer's name.
	LookupTimeout = 5 * time.Second
	// RestoreTimeout bounds one iptables-restore.
	RestoreTimeout = 10 * time.Second
)

// Mapping is one redirect of a peer's recorded address to its current
// one.
type Mapping struct {
	Name     string
	From, To PeerAddr
}

func (m Mapping) String() string {
	return fmt.Sprintf("etcd peer %s: %s -> %s", m.Name, m.From, m.To)
}

// ReadConfig reads PeersFile, checked as strictly as Plan wrote it.
func ReadConfig(sys system.System) (Config, error) {
	b, err := sys.ReadFile(PeersFile, system.LimitConfig)
	if err != nil {
		return Config{}, err
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%s: %w", PeersFile, err)
	}
	if c.Iptables != "legacy" && c.Iptables != "nft" {
		return Config{}, fmt.Errorf("%s: iptables %q is neither legacy nor nft", PeersFile, c.Iptables)
	}
	if len(c.Peers) > MaxMembers {
		return Config{}, fmt.Errorf("%s: more than %d peers", PeersFile, MaxMembers)
	}
	for _, p := range c.Peers {
		if !validName(p.Name) {
			return Config{}, fmt.Errorf("%s: peer name %q", PeersFile, clip([]byte(p.Name)))
		}
		if len(p.PeerURLs) > maxPeerURLs {
			return Config{}, fmt.Errorf("%s: peer %s: more than %d URLs", PeersFile, p.Name, maxPeerURLs)
		}
	}
	return c, nil
}

// Watcher maps cfg's peers, round after round: what one run of
// etcd-peer-nat knows.
type Watcher struct {
	cfg     Config
	sys     system.System
	pending []pendingPeer
	// Mappings are the redirects found, in the order found.
	Mappings []Mapping
	// installed counts the Mappings of each family in the kernel's
	// rules; jumped: OUTPUT jumps to Chain.
	installed map[bool]int
	jumped    map[bool]bool
}

// pendingPeer is a peer's recorded address not yet settled (found
// unchanged, or mapped).
type pendingPeer struct {
	name string
	from PeerAddr
	err  error // the last lookup's failure
}

// NewWatcher starts mapping cfg's peers; the log lines say which
// recorded URLs cannot be redirected.
func NewWatcher(sys system.System, cfg Config) (*Watcher, []plan.Action) {
	w := &Watcher{cfg: cfg, sys: sys, installed: map[bool]int{}, jumped: map[bool]bool{}}
	var logs []plan.Action
	for _, p := range cfg.Peers {
		addrs, err := Member{PeerURLs: p.PeerURLs}.PeerAddrs()
		if err != nil {
			logs = append(logs, plan.Warning(fmt.Sprintf("etcd peer %s: %v: not redirected", p.Name, err)))
		}
		for _, a := range addrs {
			w.pending = append(w.pending, pendingPeer{name: p.Name, from: a})
		}
	}
	return w, logs
}

// Done: every recorded address is settled.
func (w *Watcher) Done() bool { return len(w.pending) == 0 }

// Round looks up each pending peer once, and plans the rules of what it
// found, one iptables-restore per family that has new mappings.
func (w *Watcher) Round(ctx context.Context) []plan.Action {
	var out []plan.Action
	var still []pendingPeer
	for _, p := range w.pending {
		to, err := w.lookup(ctx, p)
		switch {
		case err != nil:
			p.err = err
			still = append(still, p)
		case to == p.from.Addr:
			out = append(out, plan.Info(fmt.Sprintf("etcd peer %s: still at %s, no redirect needed", p.name, p.from)))
		default:
			m := Mapping{Name: p.name, From: p.from, To: PeerAddr{Addr: to, Port: p.from.Port}}
			w.Mappings = append(w.Mappings, m)
			out = append(out, plan.Info(m.String()))
		}
	}
	w.pending = still
	for _, v6 := range []bool{false, true} {
		if act, ok := w.restore(v6); ok {
			out = append(out, act)
		}
	}
	return out
}

// Unresolved says which peers never resolved, once the rounds are over.
func (w *Watcher) Unresolved() []string {
	var out []string
	for _, p := range w.pending {
		out = append(out, fmt.Sprintf("%s (recorded %s): %v", p.name, p.from, p.err))
	}
	return out
}

// lookup is the peer's current address in the family of its recorded
// one: the first answer that is a node's address.
func (w *Watcher) lookup(ctx context.Context, p pendingPeer) (netip.Addr, error) {
	network := "ip4"
	if p.from.Addr.Is6() {
		network = "ip6"
	}
	ctx, cancel := context.WithTimeout(ctx, LookupTimeout)
	defer cancel()
	addrs, err := w.sys.LookupIP(ctx, network, p.name)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		a = a.Unmap()
		if a.Is6() == p.from.Addr.Is6() && a.IsGlobalUnicast() {
			return a, nil
		}
	}
	return netip.Addr{}, errors.New("no usable address")
}

// restore plans the rules of one family when it has mappings not yet
// installed: Chain declared (iptables-restore --noflush flushes a chain
// it declares, so the whole chain is rewritten each time), the jump
// from OUTPUT when it is not there yet.
func (w *Watcher) restore(v6 bool) (plan.Action, bool) {
	var ms []Mapping
	for _, m := range w.Mappings {
		if m.From.Addr.Is6() == v6 {
			ms = append(ms, m)
		}
	}
	if len(ms) == w.installed[v6] {
		return plan.Action{}, false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*nat\n:%s - [0:0]\n", Chain)
	if !w.jumped[v6] {
		fmt.Fprintf(&b, "-A OUTPUT -j %s\n", Chain)
	}
	for _, m := range ms {
		fmt.Fprintf(&b, "-A %s -d %s -p tcp -m tcp --dport %d -j DNAT --to-destination %s\n", Chain, netip.PrefixFrom(m.From.Addr, m.From.Addr.BitLen()), m.From.Port, m.To)
	}
	b.WriteString("COMMIT\n")
	return plan.Run([]string{restoreCommand(w.cfg.Iptables, v6), "--noflush"}, []byte(b.String()), RestoreTimeout).
		Because(fmt.Sprintf("%d etcd peer redirect(s)", len(ms))), true
}

// Installed records that the rules Round planned are in the kernel.
func (w *Watcher) Installed() {
	for _, v6 := range []bool{false, true} {
		n := 0
		for _, m := range w.Mappings {
			if m.From.Addr.Is6() == v6 {
				n++
			}
		}
		if n > 0 {
			w.installed[v6], w.jumped[v6] = n, true
		}
	}
}

// ProbeJumps reads whether OUTPUT already jumps to Chain (an earlier run
// of the command in this namespace), so that no jump is added twice.
func (w *Watcher) ProbeJumps(ctx context.Context) {
	for _, v6 := range []bool{false, true} {
		out, _, err := w.sys.Run(ctx, []string{saveCommand(w.cfg.Iptables, v6), "-t", "nat"}, nil, RestoreTimeout)
		if err == nil {
			w.jumped[v6] = hasLine(out, "-A OUTPUT -j "+Chain)
		}
	}
}

// hasLine reports whether one of text's lines is line, looking at them
// in place: the output of a save may be tens of MiB, in a unit that has
// 64 MiB in all.
func hasLine(text []byte, line string) bool {
	for l := range bytes.Lines(text) {
		if string(bytes.TrimSuffix(l, []byte("\n"))) == line {
			return true
		}
	}
	return false
}

func restoreCommand(mode string, v6 bool) string { return tool(v6) + "-" + mode + "-restore" }
func saveCommand(mode string, v6 bool) string    { return tool(v6) + "-" + mode + "-save" }

func tool(v6 bool) string {
	if v6 {
		return "ip6tables"
	}
	return "iptables"
}
