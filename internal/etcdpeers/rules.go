package etcdpeers

// This file holds the rules of etcd-peer-nat: what a round plans (the
// log lines, then each family's chain written whole), and what the
// kernel already has.

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// Changes are what a round of the Watcher plans: lines to log, then the
// rewrite of each family's chain whose redirects changed.
type Changes struct {
	Logs     []plan.Action
	Restores []Restore
}

// Restore is the iptables-restore of one family's chain.
type Restore struct {
	V6     bool
	Action plan.Action
}

// Actions are c as one plan, for a dry run.
func (c Changes) Actions() []plan.Action {
	out := append([]plan.Action(nil), c.Logs...)
	for _, r := range c.Restores {
		out = append(out, r.Action)
	}
	return out
}

// restore plans the rules of one family: Chain declared, which makes
// iptables-restore --noflush flush it, so the whole chain is rewritten
// in one transaction, a moved peer's rule replaced with no moment
// without it; the jump from OUTPUT when it is not there yet.
func (w *Watcher) restore(v6 bool) Restore {
	var b strings.Builder
	fmt.Fprintf(&b, "*nat\n:%s - [0:0]\n", Chain)
	if !w.jumped[family(v6)] {
		fmt.Fprintf(&b, "-A OUTPUT -j %s\n", Chain)
	}
	n := 0
	for _, m := range w.Mappings() {
		if m.From.Addr().Is6() == v6 {
			n++
			fmt.Fprintf(&b, "-A %s -d %s -p tcp -m tcp --dport %d -j DNAT --to-destination %s\n", Chain, netip.PrefixFrom(m.From.Addr(), m.From.Addr().BitLen()), m.From.Port(), m.To)
		}
	}
	b.WriteString("COMMIT\n")
	return Restore{V6: v6, Action: plan.Run([]string{restoreCommand(w.cfg.Iptables, v6), "--noflush"}, []byte(b.String()), RestoreTimeout).
		Because(fmt.Sprintf("%d etcd peer redirect(s)", n))}
}

// Installed records that a family's last planned restore is in the kernel.
func (w *Watcher) Installed(v6 bool) {
	w.stale[family(v6)], w.jumped[family(v6)] = false, true
}

// ProbeJumps reads whether OUTPUT already jumps to Chain (an earlier run
// of the command in this namespace, which systemd restarted), so that no
// jump is added twice. Such a family's chain is rewritten by the first
// round from what this run finds: the earlier run's rules may send a
// peer to where it no longer is.
func (w *Watcher) ProbeJumps(ctx context.Context) {
	for _, v6 := range []bool{false, true} {
		out, _, err := w.sys.Run(ctx, []string{saveCommand(w.cfg.Iptables, v6), "-t", "nat"}, nil, RestoreTimeout)
		if err == nil {
			f := family(v6)
			w.jumped[f] = hasLine(out, "-A OUTPUT -j "+Chain)
			w.stale[f] = w.stale[f] || w.jumped[f]
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
