package network

// This file reads the node's native nftables ruleset: where Docker 29's
// nftables firewall backend ("firewall-backend": "nftables") writes its
// embedded-DNS redirect, which no iptables-save shows (moby PR #50050):
//
//	table ip docker-dns {
//		chain dns-dnat {
//			type nat hook output priority -100; policy accept;
//			ip daddr 127.0.0.11 udp dport 53 counter dnat to 127.0.0.11:39499
//			ip daddr 127.0.0.11 tcp dport 53 counter dnat to 127.0.0.11:43261
//		}
//		chain dns-snat { ... snat to :53 }
//	}
//
// The ruleset is read as nft's JSON (`nft --json list ruleset`): a
// documented schema (libnftables-json(5)), where the text form is meant
// for people and changes between releases. Only the shapes of a NAT rule
// are understood (payload matches of addresses and ports, counter,
// dnat/snat to a plain address and port); every other rule is counted and
// left alone: it is not Docker's redirect, nor ours.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// NftListArgv lists the node's whole ruleset, as JSON.
var NftListArgv = []string{"nft", "--json", "list", "ruleset"}

// NftApplyArgv loads a ruleset file from standard input, as one
// transaction: all of it or nothing.
var NftApplyArgv = []string{"nft", "-f", "-"}

// MaxNativeRules is the most rules a ruleset may hold (a busy kube-proxy
// in nftables mode writes tens of thousands).
const MaxNativeRules = 1 << 20

// NatRule is one rule of a nat chain that nft printed in the shapes this
// package understands.
type NatRule struct {
	// Table and Chain name the rule's place; Hook is its chain's hook
	// ("output", "prerouting", "postrouting"; "" for a regular chain).
	Table, Chain, Hook string
	// Daddr and Saddr are the IPv4 addresses it matches (invalid: none).
	Daddr, Saddr netip.Addr
	// Proto is the layer-4 protocol of its port match ("udp", "tcp").
	Proto        string
	Dport, Sport uint16
	// NAT is "dnat" or "snat"; To is where to (an invalid address keeps
	// the packet's own, as in "snat to :53"), ToPort 0 keeps the port.
	NAT    string
	To     netip.Addr
	ToPort uint16
}

// String is the rule in nft's own words, after its chain's hook.
func (r NatRule) String() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s:", r.Hook)
	if r.Daddr.IsValid() {
		fmt.Fprintf(&b, " ip daddr %s", r.Daddr)
	}
	if r.Saddr.IsValid() {
		fmt.Fprintf(&b, " ip saddr %s", r.Saddr)
	}
	if r.Dport != 0 {
		fmt.Fprintf(&b, " %s dport %d", r.Proto, r.Dport)
	}
	if r.Sport != 0 {
		fmt.Fprintf(&b, " %s sport %d", r.Proto, r.Sport)
	}
	to := ""
	if r.To.IsValid() {
		to = r.To.String()
	}
	if r.ToPort != 0 {
		to += ":" + strconv.Itoa(int(r.ToPort))
	}
	fmt.Fprintf(&b, " %s to %s", r.NAT, to)
	return b.String()
}

// Ruleset is what nft listed: the NAT rules understood, in the order nft
// listed them (within a chain, the order the kernel evaluates them), and
// how many tables and rules there were in all.
type Ruleset struct {
	Tables, Rules int
	NAT           []NatRule
}

// The JSON shapes read; encoding/json skips every other field.
type (
	nftDoc struct {
		Nftables []nftObject `json:"nftables"`
	}
	nftObject struct {
		Table *struct{} `json:"table"`
		Chain *struct {
			Family, Table, Name, Type, Hook string
		} `json:"chain"`
		Rule *struct {
			Family, Table, Chain string
			Expr                 []nftExpr `json:"expr"`
		} `json:"rule"`
	}
	nftExpr struct {
		Match *struct {
			Op   string `json:"op"`
			Left struct {
				Payload *struct{ Protocol, Field string } `json:"payload"`
			} `json:"left"`
			Right json.RawMessage `json:"right"`
		} `json:"match"`
		Counter json.RawMessage `json:"counter"`
		Dnat    *nftNAT         `json:"dnat"`
		Snat    *nftNAT         `json:"snat"`
	}
	nftNAT struct {
		Addr json.RawMessage `json:"addr"`
		Port json.RawMessage `json:"port"`
	}
)

// ParseRuleset reads `nft --json list ruleset` output. An error says what
// is wrong with the document as a whole, never quoting it.
func ParseRuleset(out []byte) (Ruleset, error) {
	var doc nftDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		return Ruleset{}, fmt.Errorf("%d bytes: %s", len(out), system.JSONDamage(err, "nft's JSON ruleset", "nftables"))
	}
	var rs Ruleset
	type chainKey struct{ table, chain string }
	hooks := map[chainKey]string{}
	for _, o := range doc.Nftables {
		switch {
		case o.Table != nil:
			rs.Tables++
		case o.Chain != nil && o.Chain.Family == "ip" && o.Chain.Type == "nat":
			hooks[chainKey{o.Chain.Table, o.Chain.Name}] = o.Chain.Hook
		case o.Rule != nil:
			rs.Rules++
			if rs.Rules > MaxNativeRules {
				return Ruleset{}, fmt.Errorf("more than %d rules (MaxNativeRules)", MaxNativeRules)
			}
			hook, nat := hooks[chainKey{o.Rule.Table, o.Rule.Chain}]
			if o.Rule.Family != "ip" || !nat {
				continue
			}
			if r, ok := natRule(o.Rule.Expr); ok {
				r.Table, r.Chain, r.Hook = o.Rule.Table, o.Rule.Chain, hook
				rs.NAT = append(rs.NAT, r)
			}
		}
	}
	return rs, nil
}

// natRule reads a rule's expressions: ok only when each one is understood
// and the rule ends in one dnat or snat.
func natRule(exprs []nftExpr) (r NatRule, ok bool) {
	for i, e := range exprs {
		switch {
		case e.Counter != nil && e.Match == nil && e.Dnat == nil && e.Snat == nil:
		case e.Match != nil && e.Dnat == nil && e.Snat == nil:
			if !r.match(e.Match.Op, e.Match.Left.Payload, e.Match.Right) {
				return NatRule{}, false
			}
		case (e.Dnat != nil) != (e.Snat != nil) && e.Match == nil && i == len(exprs)-1:
			nat, kind := e.Dnat, "dnat"
			if nat == nil {
				nat, kind = e.Snat, "snat"
			}
			to, port, ok := natTarget(nat)
			if !ok {
				return NatRule{}, false
			}
			r.NAT, r.To, r.ToPort = kind, to, port
		default:
			return NatRule{}, false
		}
	}
	return r, r.NAT != ""
}

// match records one payload match of an address or a port.
func (r *NatRule) match(op string, p *struct{ Protocol, Field string }, right json.RawMessage) bool {
	if op != "==" || p == nil {
		return false
	}
	switch {
	case p.Protocol == "ip" && (p.Field == "daddr" || p.Field == "saddr"):
		a, ok := jsonAddr(right)
		if !ok {
			return false
		}
		if p.Field == "daddr" {
			r.Daddr = a
		} else {
			r.Saddr = a
		}
	case (p.Protocol == "udp" || p.Protocol == "tcp") && (p.Field == "dport" || p.Field == "sport"):
		port, ok := jsonPort(right)
		if !ok || (r.Proto != "" && r.Proto != p.Protocol) {
			return false
		}
		r.Proto = p.Protocol
		if p.Field == "dport" {
			r.Dport = port
		} else {
			r.Sport = port
		}
	default:
		return false
	}
	return true
}

// natTarget reads a dnat's or snat's plain address and port; either may
// be missing, not both.
func natTarget(n *nftNAT) (to netip.Addr, port uint16, ok bool) {
	if n.Addr != nil {
		if to, ok = jsonAddr(n.Addr); !ok {
			return
		}
	}
	if n.Port != nil {
		if port, ok = jsonPort(n.Port); !ok {
			return
		}
	}
	return to, port, to.IsValid() || port != 0
}

// jsonAddr is a JSON string holding one IPv4 address.
func jsonAddr(raw json.RawMessage) (netip.Addr, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	return a, err == nil && a.Is4()
}

// jsonPort is a JSON number holding a port, 1 to 65535.
func jsonPort(raw json.RawMessage) (uint16, bool) {
	n, err := strconv.ParseUint(string(bytes.TrimSpace(raw)), 10, 16)
	return uint16(n), err == nil && n > 0
}

// DockerRedirect is where Docker's embedded DNS listens behind its
// redirect: the ports that queries to 127.0.0.11:53 are sent to.
type DockerRedirect struct {
	// Table is the table holding it ("docker-dns").
	Table            string
	UDPPort, TCPPort uint16
}

// DockerRedirect finds Docker's embedded-DNS redirect among the rules:
// the first rule of each protocol, in an output nat chain, sending
// 127.0.0.11:53 to 127.0.0.11 at another port. ok is false when there is
// none.
func (rs Ruleset) DockerRedirect() (d DockerRedirect, ok bool) {
	dns := netip.MustParseAddr(dockerEmbeddedDNS)
	for _, r := range rs.NAT {
		if r.Hook != "output" || r.NAT != "dnat" || r.Daddr != dns || r.Dport != 53 || r.To != dns || r.ToPort == 0 {
			continue
		}
		switch {
		case r.Proto == "udp" && d.UDPPort == 0:
			d.UDPPort = r.ToPort
		case r.Proto == "tcp" && d.TCPPort == 0:
			d.TCPPort = r.ToPort
		default:
			continue
		}
		if d.Table == "" {
			d.Table = r.Table
		}
	}
	return d, d.Table != ""
}

// Table is the rules of one table, in order.
func (rs Ruleset) Table(name string) []NatRule {
	var out []NatRule
	for _, r := range rs.NAT {
		if r.Table == name {
			out = append(out, r)
		}
	}
	return out
}
