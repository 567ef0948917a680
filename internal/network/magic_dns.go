package network

// This file holds the DNS part of enable_network_magic: the iptables rules
// that take pods' queries to Docker's embedded DNS, and the resolv.conf
// rewrite.

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// DNSRestoreAhead is the iptables-restore enable_network_magic will plan
// first, decided as the step decides it (DetectIptables, DetectMagic,
// PlanMagic) but before step 1 has finished: its inputs are the probes'
// answers and files that steps 1–9 leave alone, so boot can start it
// early (plan.Ahead). ok is false when the step would fail before it, or
// plan none.
func (p *Probes) DNSRestoreAhead(ctx context.Context, lookupEnv func(string) (string, bool)) (plan.Action, bool) {
	ipt, err := p.DetectIptables(ctx)
	if err != nil {
		return plan.Action{}, false
	}
	f, err := p.DetectMagic(ctx, lookupEnv, ipt)
	if err != nil {
		return plan.Action{}, false
	}
	// A plan that fails still applies the actions before the failure.
	actions, _ := PlanMagic(f)
	if len(actions) == 0 || actions[0].Op != plan.OpRun {
		return plan.Action{}, false
	}
	return actions[0], true
}

// planDNSRules points Docker's embedded-DNS rules at the host IP; see
// RewriteDockerDNS. served reports whether the rules, once applied, take
// DNS queries for the host IP to Docker's server: only then may
// resolv.conf name the host IP instead of 127.0.0.11.
func planDNSRules(f MagicFacts, hostIP netip.Addr) (actions []plan.Action, served bool, err error) {
	if _, ok := f.Iptables.Native.Docker(); ok {
		// Only read when no backend holds Docker's rules: a failed
		// save of the chosen backend does not matter then.
		actions, served = planNativeDNS(f.Iptables.Native, hostIP)
		return actions, served, nil
	}
	if f.Rules.Err != nil {
		// The script stops here too (its iptables-save fails the
		// pipeline). A cluster whose pods cannot resolve a name is worse
		// than a node that says why it did not start; only a node that
		// does not use Docker's DNS loses nothing by booting on.
		if f.NamesEmbeddedDNS() {
			return nil, false, fmt.Errorf("cannot read the %s rules, which pods need to reach Docker's DNS at %s: %w",
				f.Mode, dockerEmbeddedDNS, f.Rules.Err)
		}
		return []plan.Action{plan.Warning(fmt.Sprintf(
			"cannot read the %s rules (%v); %s does not use Docker's DNS, so nothing needs them", f.Mode, f.Rules.Err, ResolvConf))}, false, nil
	}
	out, changed := RewriteDockerDNS(f.Rules.Value, hostIP.String())
	served = dnatsToEmbeddedDNS(out)
	if !changed {
		return nil, served, nil
	}
	return []plan.Action{
		// Fatal on failure: resolv.conf, rewritten next, must not name
		// an address no rule serves.
		plan.Run([]string{f.Mode.RestoreCommand()}, out, CommandTimeout).
			Because(fmt.Sprintf("Docker's DNS rules for %s now serve pods via %s", dockerEmbeddedDNS, hostIP)),
	}, served, nil
}

// noEmbeddedDNS says why the step leaves the nameservers and the DNS rules
// alone on a node with no trace of Docker's embedded DNS: podman (its
// aardvark-dns or dnsname plugin answers at the network's gateway, an
// address pods reach as they are) and other engines whose resolv.conf needs
// no rewrite. A Docker node always has both the nameserver line (until it
// is rewritten) and the DNAT rules (Docker re-creates them in every new
// network namespace), so it never gets this line. ok is false when there is
// something of Docker's, or when resolv.conf or the rules could not be read
// (those cases have their own lines).
func noEmbeddedDNS(f MagicFacts) (string, bool) {
	if _, native := f.Iptables.Native.Docker(); f.Resolv == nil || f.Rules.Err != nil || native || namesEmbeddedDNS(f.Resolv.Data) || dnatsToEmbeddedDNS(f.Rules.Value) {
		return "", false
	}
	return fmt.Sprintf("no nameserver %s in %s and no %s rule sending to it (not Docker's embedded DNS): leaving the nameservers and the DNS rules as they are",
		dockerEmbeddedDNS, ResolvConf, f.Mode), true
}

// dnatsToEmbeddedDNS reports whether iptables-save output has a rule
// sending packets to Docker's embedded DNS server.
func dnatsToEmbeddedDNS(save []byte) bool {
	// Only a rule naming the address can send to it: no other is parsed.
	named := newLineMatcher(save, []string{dockerEmbeddedDNS})
	var spans []span
	for l := range saveRules(save) {
		if !named.in(l.start, l.start+len(l.text)) {
			continue
		}
		var r rule
		r, spans = appendRule(spans[:0], strings.TrimRight(string(l.text), "\r"))
		for i := range r.args {
			if r.arg(i) == "--to-destination" {
				if to := r.arg(i + 1); to == dockerEmbeddedDNS || strings.HasPrefix(to, dockerEmbeddedDNS+":") {
					return true
				}
			}
		}
	}
	return false
}

// NamesEmbeddedDNS reports whether resolv.conf names Docker's embedded
// DNS (before the step rewrote it).
func (f MagicFacts) NamesEmbeddedDNS() bool {
	return f.Resolv != nil && namesEmbeddedDNS(f.Resolv.Data)
}

// namesEmbeddedDNS reports whether resolv.conf has a nameserver line for
// Docker's embedded DNS server: a line the rewrite points at the host IP
// (see resolvFields), and no other. strings.Fields also split at blanks
// no resolver splits at (a vertical tab, U+00A0), so a line the rewrite
// rightly left alone made a node without Docker's DNS fail for the rules.
func namesEmbeddedDNS(resolv []byte) bool {
	for line := range bytes.Lines(resolv) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if f, n := resolvFields(line); namesEmbeddedDNSLine(line, f, n) {
			return true
		}
	}
	return false
}

// planResolvConf keeps the original and rewrites /etc/resolv.conf in place:
// Docker bind-mounts it, and a rename over a mount point fails. Without a
// host IP only the search lines change (KIND_DNS_SEARCH). With a valid v6
// it also names the forwarder there (withForwarder); forwarded says it
// does.
func planResolvConf(f MagicFacts, hostIP netip.Addr, served bool, v6 netip.Addr) (_ []plan.Action, forwarded bool, _ error) {
	if f.Resolv == nil {
		return []plan.Action{plan.Warning(ResolvConf + " does not exist; not rewriting it")}, false, nil
	}
	if hostIP.IsValid() && namesEmbeddedDNS(f.Resolv.Data) && !served {
		// The rules were saved from a backend Docker did not write to
		// (its save hung or failed). The script would point resolv.conf
		// at the host IP all the same and break the node's own DNS; left
		// as it is, the node resolves but its pods cannot. Either way
		// the cluster's DNS is broken: say so and stop.
		return nil, false, fmt.Errorf("the %s rules send nothing to %s, which %s names: pods could not use Docker's DNS (%s)",
			f.Mode, dockerEmbeddedDNS, ResolvConf, f.backendHint())
	}
	out, err := rewriteResolvConf(f.Resolv.Data, hostIP, f.Search)
	if err != nil {
		return nil, false, fmt.Errorf("rewrite %s: %w", ResolvConf, err)
	}
	// The copy is of what Docker wrote: after a restart the file is
	// already rewritten, and the first boot's copy is the one to keep. A
	// change of the forwarder's line alone (a new IPv6 address) is ours.
	keep := !bytes.Equal(out, f.Resolv.Data) || !f.OriginalExists
	if v6.IsValid() {
		var recorded netip.Addr // the last boot's IPv6 address, if it parses
		if f.IPv6.Old != nil {
			recorded, _ = netip.ParseAddr(*f.IPv6.Old)
		}
		out, forwarded = withForwarder(out, hostIP, v6, recorded)
	}
	var actions []plan.Action
	if keep {
		actions = append(actions, plan.WriteFile(ResolvConfOriginal, f.Resolv.Data, f.Resolv.Mode))
	}
	if !bytes.Equal(out, f.Resolv.Data) {
		actions = append(actions, plan.WriteInPlace(ResolvConf, out).
			Because("a bind mount: rewritten in place"))
	}
	return actions, forwarded, nil
}
