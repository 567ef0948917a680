package etcdpeers

// This file holds the Watcher of etcd-peer-nat: where each recorded peer
// address's name resolves now, and what a lookup changes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
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
	From, To netip.AddrPort
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

// Watcher maps cfg's peers for as long as a run of etcd-peer-nat lasts,
// a Round at a time. Its memory is fixed when it is made, one entry per
// recorded address (at most MaxMembers × maxPeerURLs, ReadConfig's
// caps), however long it runs; a round's work is linear in their
// number.
type Watcher struct {
	cfg   Config
	sys   system.System
	peers []peerAddr
	// stale: the family's chain in the kernel is not what peers say;
	// jumped: OUTPUT jumps to Chain; failing: its last restore failed.
	// Indexed by family (v4, v6).
	stale, jumped, failing [2]bool
}

// peerAddr is one recorded address of a peer and where its rule sends
// it.
type peerAddr struct {
	name string
	from netip.AddrPort
	// to is the peer's address as last resolved: invalid until its
	// name first resolves, from itself when no redirect is needed.
	to netip.Addr
	// err is why the last lookup failed; nil when it did not.
	err error
}

// family indexes Watcher's arrays: 0 IPv4, 1 IPv6.
func family(v6 bool) int {
	if v6 {
		return 1
	}
	return 0
}

// NewWatcher starts mapping cfg's peers; the log lines say which
// recorded URLs cannot be redirected.
func NewWatcher(sys system.System, cfg Config) (*Watcher, []plan.Action) {
	w := &Watcher{cfg: cfg, sys: sys}
	var logs []plan.Action
	for _, p := range cfg.Peers {
		addrs, err := Member{PeerURLs: p.PeerURLs}.PeerAddrs()
		if err != nil {
			logs = append(logs, plan.Warning(fmt.Sprintf("etcd peer %s: %v: not redirected", p.Name, err)))
		}
		for _, a := range addrs {
			w.peers = append(w.peers, peerAddr{name: p.Name, from: a})
		}
	}
	return w, logs
}

// Done: every recorded address's peer has resolved once, and its rules
// are installed.
func (w *Watcher) Done() bool {
	unresolved := func(p peerAddr) bool { return !p.to.IsValid() }
	return !slices.ContainsFunc(w.peers, unresolved) && !w.stale[0] && !w.stale[1]
}

// Round looks up every peer once (one lookup per name and family), and
// plans the rules of the families whose redirects changed or were never
// installed. A peer found where it was costs nothing; one that moved
// gets its rule replaced; one that stops resolving keeps its rule,
// which is said once, and once more when it resolves again.
func (w *Watcher) Round(ctx context.Context) Changes {
	var c Changes
	var last struct {
		name string
		v6   bool
		addr []netip.Addr
		err  error
	}
	for i := range w.peers {
		p := &w.peers[i]
		v6 := p.from.Addr().Is6()
		// A peer's URLs of one family come one after another: one
		// lookup serves them all.
		if last.name != p.name || last.v6 != v6 { // names are never empty
			last.name, last.v6 = p.name, v6
			last.addr, last.err = w.lookup(ctx, p.name, v6)
		}
		if line, ok := w.found(p, last.addr, last.err); ok {
			c.Logs = append(c.Logs, line)
		}
	}
	for _, v6 := range []bool{false, true} {
		if w.stale[family(v6)] {
			c.Restores = append(c.Restores, w.restore(v6))
		}
	}
	return c
}

// found records what a lookup of p's name answered, and what to say.
func (w *Watcher) found(p *peerAddr, answers []netip.Addr, err error) (plan.Action, bool) {
	var to netip.Addr
	if err == nil {
		if to = pick(answers, p.from.Addr().Is6(), p.to, p.from.Addr()); !to.IsValid() {
			err = errors.New("no address of a node in the answer")
		}
	}
	if err != nil {
		was := p.err != nil
		p.err = err
		if was || !p.to.IsValid() {
			return plan.Action{}, false // a peer never resolved: Unresolved says it
		}
		if p.to == p.from.Addr() {
			return plan.Warning(fmt.Sprintf("etcd peer %s stopped resolving (%v): left at its recorded %s", p.name, err, p.from)), true
		}
		return plan.Warning(fmt.Sprintf("etcd peer %s stopped resolving (%v): its redirect to %s stays", p.name, err, w.current(p))), true
	}
	recovered := p.err != nil && p.to.IsValid()
	p.err = nil
	switch {
	case !p.to.IsValid():
		p.to = to
		if to == p.from.Addr() {
			return plan.Info(fmt.Sprintf("etcd peer %s: still at %s, no redirect needed", p.name, p.from)), true
		}
		w.stale[family(to.Is6())] = true
		return plan.Info(fmt.Sprintf("etcd peer %s: %s -> %s", p.name, p.from, w.current(p))), true
	case to != p.to:
		was := w.current(p)
		p.to = to
		w.stale[family(to.Is6())] = true
		how := "redirected"
		if to == p.from.Addr() {
			how = "no redirect needed"
		}
		return plan.Info(fmt.Sprintf("etcd peer %s moved: %s -> %s (recorded %s: %s)", p.name, was, w.current(p), p.from, how)), true
	case recovered:
		return plan.Info(fmt.Sprintf("etcd peer %s resolves again, still at %s", p.name, w.current(p))), true
	}
	return plan.Action{}, false
}

// current is where p's rule sends its recorded address now.
func (w *Watcher) current(p *peerAddr) netip.AddrPort { return netip.AddrPortFrom(p.to, p.from.Port()) }

func (w *Watcher) lookup(ctx context.Context, name string, v6 bool) ([]netip.Addr, error) {
	network := "ip4"
	if v6 {
		network = "ip6"
	}
	ctx, cancel := context.WithTimeout(ctx, LookupTimeout)
	defer cancel()
	return w.sys.LookupIP(ctx, network, name)
}

// pick is the peer's address among a lookup's answers: one of its
// recorded address's family that a node can have (global unicast: no
// loopback, link-local, multicast or unspecified address). When several
// qualify (a name that two containers claim, in an order that may
// change), it is the one the rule sends to now, else the recorded one,
// else the first: a rule never flaps with the order of the answers. The
// invalid address when none qualifies.
func pick(answers []netip.Addr, v6 bool, now, recorded netip.Addr) netip.Addr {
	var first, home netip.Addr
	for _, a := range answers {
		a = a.Unmap()
		if a.Is6() != v6 || !a.IsGlobalUnicast() || a.Zone() != "" {
			continue
		}
		switch {
		case a == now:
			return a
		case a == recorded:
			home = a
		case !first.IsValid():
			first = a
		}
	}
	if home.IsValid() {
		return home
	}
	return first
}

// Mappings are the redirects in place: the peers resolved at an address
// other than the recorded one, in the peers file's order.
func (w *Watcher) Mappings() []Mapping {
	var out []Mapping
	for i := range w.peers {
		if p := &w.peers[i]; p.to.IsValid() && p.to != p.from.Addr() {
			out = append(out, Mapping{Name: p.name, From: p.from, To: w.current(p)})
		}
	}
	return out
}

// Unresolved says which peers never resolved.
func (w *Watcher) Unresolved() []string {
	var out []string
	for _, p := range w.peers {
		if !p.to.IsValid() {
			out = append(out, fmt.Sprintf("%s (recorded %s): %v", p.name, p.from, p.err))
		}
	}
	return out
}
