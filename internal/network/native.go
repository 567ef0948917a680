package network

// This file holds what steps 9 and 10 know of the native nftables ruleset
// (nftables.go reads it), and the table enable_network_magic writes when
// Docker's DNS redirect lives there: Docker's own table is never edited.

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// NativeTable is the table of our own that sends the host IP's port 53 to
// Docker's resolver when Docker's redirect is native.
const NativeTable = "kind-dns"

// NativeFacts is what nft showed of the node's ruleset. nft runs only when
// no iptables-save holds a rule sending to Docker's DNS: then, and only
// then, the redirect may be native (Docker 29's nftables backend).
type NativeFacts struct {
	// NotRun says why nft was not run; "" when it ran.
	NotRun string
	// Err is why nft failed, or why its output could not be read.
	Err     error
	Ruleset Ruleset
}

// Docker is Docker's native DNS redirect; ok is false when there is none
// (or nft was not run, or failed).
func (n NativeFacts) Docker() (DockerRedirect, bool) {
	if n.NotRun != "" || n.Err != nil {
		return DockerRedirect{}, false
	}
	return n.Ruleset.DockerRedirect()
}

// Describe is the fact line of the native ruleset.
func (n NativeFacts) Describe() string {
	switch {
	case n.NotRun != "":
		return "not read: " + n.NotRun
	case system.NotInstalled(n.Err):
		return "nft not installed"
	case n.Err != nil:
		return "nft failed: " + n.Err.Error()
	}
	s := fmt.Sprintf("%d tables, %d rules", n.Ruleset.Tables, n.Ruleset.Rules)
	if d, ok := n.Docker(); ok {
		s += fmt.Sprintf("; Docker's DNS redirect in table ip %s (udp %s, tcp %s)", d.Table, portOrNone(d.UDPPort), portOrNone(d.TCPPort))
	} else {
		s += "; no rule sends to " + dockerEmbeddedDNS
	}
	return s
}

func portOrNone(p uint16) string {
	if p == 0 {
		return "none"
	}
	return strconv.Itoa(int(p))
}

// readNative runs nft and reads its ruleset.
func readNative(ctx context.Context, sys system.System, timeout time.Duration) NativeFacts {
	out, _, err := sys.Run(ctx, NftListArgv, nil, timeout)
	if err != nil {
		return NativeFacts{Err: err}
	}
	rs, err := ParseRuleset(out)
	if err != nil {
		return NativeFacts{Err: fmt.Errorf("%s: %w", strings.Join(NftListArgv, " "), err)}
	}
	return NativeFacts{Ruleset: rs}
}

// nativeRules are the rules of NativeTable that send hostIP:53 to
// Docker's resolver ports d, for the node's own packets (output) and for
// pods' (prerouting), and give the replies hostIP:53 as their source, as
// the script's rewrite of Docker's iptables rules does.
func nativeRules(d DockerRedirect, hostIP netip.Addr) []NatRule {
	dns := netip.MustParseAddr(dockerEmbeddedDNS)
	var rules []NatRule
	for _, hook := range []string{"output", "prerouting"} {
		for _, p := range d.ports() {
			rules = append(rules, NatRule{Table: NativeTable, Chain: hook, Hook: hook,
				Daddr: hostIP, Proto: p.proto, Dport: 53, NAT: "dnat", To: dns, ToPort: p.port})
		}
	}
	for _, p := range d.ports() {
		rules = append(rules, NatRule{Table: NativeTable, Chain: "postrouting", Hook: "postrouting",
			Saddr: dns, Proto: p.proto, Sport: p.port, NAT: "snat", To: hostIP, ToPort: 53})
	}
	return rules
}

type protoPort struct {
	proto string
	port  uint16
}

// ports are the redirect's protocols that have a port.
func (d DockerRedirect) ports() []protoPort {
	var out []protoPort
	if d.UDPPort != 0 {
		out = append(out, protoPort{"udp", d.UDPPort})
	}
	if d.TCPPort != 0 {
		out = append(out, protoPort{"tcp", d.TCPPort})
	}
	return out
}

// nativeScript is the nft file that replaces NativeTable with rules in one
// transaction: declaring the table first makes its deletion succeed when
// it does not exist yet.
func nativeScript(rules []NatRule) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s\ndelete table ip %s\ntable ip %s {\n", NativeTable, NativeTable, NativeTable)
	for _, c := range []struct{ hook, prio string }{{"output", "-100"}, {"prerouting", "-100"}, {"postrouting", "100"}} {
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype nat hook %s priority %s; policy accept;\n", c.hook, c.hook, c.prio)
		for _, r := range rules {
			if r.Chain == c.hook {
				// The rule's words after "HOOK:" are nft's own.
				_, text, _ := strings.Cut(r.String(), ": ")
				fmt.Fprintf(&b, "\t\t%s\n", text)
			}
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// planNativeDNS writes NativeTable when Docker's redirect is native and
// the table does not hold the rules already (a restart gives a new network
// namespace, and Docker new ports, so every boot writes it). served
// reports whether the host IP's port 53 then reaches Docker's DNS.
func planNativeDNS(n NativeFacts, hostIP netip.Addr) (actions []plan.Action, served bool) {
	d, ok := n.Docker()
	if !ok || !hostIP.Is4() {
		return nil, false
	}
	want := nativeRules(d, hostIP)
	if slices.Equal(ruleStrings(n.Ruleset.Table(NativeTable)), ruleStrings(want)) {
		return nil, true
	}
	return []plan.Action{
		// Fatal on failure: resolv.conf, rewritten next, must not name
		// an address no rule serves.
		plan.Run(NftApplyArgv, nativeScript(want), CommandTimeout).ShownWhole().
			Because(fmt.Sprintf("Docker's DNS redirect is native nftables (table ip %s): table ip %s sends %s:53 to it for the node and its pods",
				d.Table, NativeTable, hostIP)),
	}, true
}

// ruleStrings are the rules in nft's words, sorted: the chains' order
// in nft's listing is not the kernel's to keep.
func ruleStrings(rules []NatRule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.Chain + " " + r.String()
	}
	slices.Sort(out)
	return out
}
