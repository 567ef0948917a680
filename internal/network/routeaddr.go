package network

// This file holds the pure parsers behind the node's address on the
// default route's interface (nodeaddr.go): the node's own IPv4 addresses in
// /proc/net/fib_trie, and the IPv6 default route and addresses in
// /proc/net/ipv6_route and /proc/net/if_inet6. /proc/net/route is route.go's.
// The node's own addresses also tell a stale answer for its name.
//
// Files, not netlink: every read goes through system.System, so a captured
// node's tree replays the answer and the Recorder archives what was read.

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// Files the node's address on the default route's interface is read from.
const (
	ProcNetFibTrie   = "/proc/net/fib_trie"
	ProcNetIPv6Route = "/proc/net/ipv6_route"
	ProcNetIfInet6   = "/proc/net/if_inet6"
)

// ifaFDadFailed is IFA_F_DADFAILED of <linux/if_addr.h>: another host on
// the link holds the address, so it is not this node's. A tentative
// address (DAD still running, as just after the container started) is.
const ifaFDadFailed = 0x08

// routeAddrV4 is the address on the IPv4 default route's interface, from
// /proc/net/route (printed in order, see parseRoutesV4) and
// /proc/net/fib_trie: the first of the node's own addresses in a network
// connected to that interface.
func routeAddrV4(table, trie []byte, order binary.ByteOrder) (netip.Addr, string, error) {
	routes, err := parseRoutesV4(table, order)
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("%s: %w", ProcNetRoute, err)
	}
	iface, prefixes, err := defaultInterfaceV4(routes)
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("%s: %w", ProcNetRoute, err)
	}
	addr, ok := addrInPrefixes(localAddrsV4(trie), prefixes)
	if !ok {
		return netip.Addr{}, "", fmt.Errorf("%s, the default route's interface, has no address of its networks in %s", iface, ProcNetFibTrie)
	}
	return addr, iface, nil
}

// routeAddrV6 is the address on the IPv6 default route's interface, from
// /proc/net/ipv6_route and /proc/net/if_inet6.
func routeAddrV6(routes, addrs []byte) (netip.Addr, string, error) {
	iface, err := defaultInterfaceV6(routes)
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("%s: %w", ProcNetIPv6Route, err)
	}
	addr, err := ifaceAddrV6(addrs, iface)
	if err != nil {
		return netip.Addr{}, "", fmt.Errorf("%s: %w", ProcNetIfInet6, err)
	}
	return addr, iface, nil
}

// defaultInterfaceV4 returns the interface of the IPv4 default route in
// routes (the lowest metric; of equals, the first), and the prefixes of
// the routes to its directly connected networks.
func defaultInterfaceV4(routes []routeV4) (string, []netip.Prefix, error) {
	best := -1
	for i, r := range routes {
		if r.isDefault() && (best < 0 || r.metric < routes[best].metric) {
			best = i
		}
	}
	if best < 0 {
		return "", nil, errors.New("no IPv4 default route")
	}
	iface := routes[best].iface
	if iface == "" {
		return "", nil, errors.New("line 1: header has no Iface column")
	}
	var prefixes []netip.Prefix
	for _, r := range routes {
		if r.iface == iface && r.bits > 0 && r.gateway.IsUnspecified() &&
			r.flags&rtfUp != 0 && r.flags&rtfReject == 0 {
			prefixes = append(prefixes, netip.PrefixFrom(r.dest, r.bits).Masked())
		}
	}
	return iface, prefixes, nil
}

// localAddrsV4 returns the IPv4 addresses /proc/net/fib_trie lists as the
// node's own, each once, in the file's order: the leaves ("|-- ADDR") with
// a "/32 host LOCAL" entry, the route the kernel adds for every address it
// holds. The trie is a debugging format: a line of any other shape (torn,
// from a newer kernel) is skipped, and ends the leaf above it, so that no
// entry is taken for the wrong address.
func localAddrsV4(trie []byte) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	var leaf netip.Addr
	for line := range strings.Lines(string(trie)) {
		line = strings.TrimSpace(line)
		if s, ok := strings.CutPrefix(line, "|-- "); ok {
			leaf, _ = netip.ParseAddr(s)
			continue
		}
		if !strings.HasPrefix(line, "/") {
			leaf = netip.Addr{}
			continue
		}
		// "/32 host LOCAL": prefix length, scope, type.
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "/32" && f[2] == "LOCAL" && leaf.Is4() && !seen[leaf] {
			seen[leaf] = true
			out = append(out, leaf)
		}
	}
	return out
}

// addrInPrefixes returns the first of addrs that is a host's address
// (UsableHostIP) in one of prefixes. Linear in len(addrs): each address
// is masked once per distinct prefix length (at most 33), not compared
// with every prefix.
func addrInPrefixes(addrs []netip.Addr, prefixes []netip.Prefix) (netip.Addr, bool) {
	in := map[netip.Prefix]bool{}
	var lengths []int
	for _, p := range prefixes {
		if !in[p] {
			in[p] = true
			if !slices.Contains(lengths, p.Bits()) {
				lengths = append(lengths, p.Bits())
			}
		}
	}
	for _, a := range addrs {
		if !UsableHostIP(a) {
			continue
		}
		for _, l := range lengths {
			if p, err := a.Prefix(l); err == nil && in[p] {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// defaultInterfaceV6 returns the interface of the IPv6 default route in
// /proc/net/ipv6_route: destination ::/0, up, no reject route (the kernel
// lists an unreachable default on lo), the lowest metric, of equals the
// first. Its lines are "DEST PLEN SRC SPLEN NEXTHOP METRIC REFCNT USE FLAGS
// IFACE", addresses as 32 hex digits in network order. A line that cannot
// be read is an error naming it, as for /proc/net/route: skipping it could
// skip the default route.
func defaultInterfaceV6(table []byte) (string, error) {
	best, bestMetric := "", uint64(0)
	err := eachRow(table, 10, func(lineNo int, f []string) error {
		dest, err := parseHexAddr6(f[0])
		if err != nil {
			return fmt.Errorf("line %d: destination %s: %w", lineNo, logline.QuoteClipped(f[0]), err)
		}
		var v [3]uint64 // prefix length, metric, flags
		for i, j := range [3]int{1, 5, 8} {
			if v[i], err = strconv.ParseUint(f[j], 16, 32); err != nil || len(f[j]) > 8 {
				return fmt.Errorf("line %d: field %d %s: want hex digits", lineNo, j+1, logline.QuoteClipped(f[j]))
			}
		}
		plen, metric, flags := v[0], v[1], v[2]
		if !dest.IsUnspecified() || plen != 0 || flags&rtfUp == 0 || flags&rtfReject != 0 || f[9] == "lo" {
			return nil
		}
		if best == "" || metric < bestMetric {
			best, bestMetric = f[9], metric
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if best == "" {
		return "", errors.New("no IPv6 default route")
	}
	return best, nil
}

// ifaceAddrV6 returns the first global IPv6 address /proc/net/if_inet6
// lists on iface that is a host's address and not one whose duplicate
// address detection failed.
func ifaceAddrV6(list []byte, iface string) (netip.Addr, error) {
	var found netip.Addr
	err := eachInet6(list, func(r inet6Row) {
		if !found.IsValid() && r.iface == iface && r.scope == 0 && r.flags&ifaFDadFailed == 0 &&
			!r.addr.Is4In6() && UsableHostIP(r.addr) {
			found = r.addr
		}
	})
	if err != nil {
		return netip.Addr{}, err
	}
	if !found.IsValid() {
		return netip.Addr{}, fmt.Errorf("%s, the default route's interface, has no global IPv6 address", iface)
	}
	return found, nil
}

// localAddrsV6 returns the IPv6 addresses /proc/net/if_inet6 lists, on any
// interface and of any scope, but for those whose duplicate address
// detection failed (another host holds them), in the file's order.
func localAddrsV6(list []byte) ([]netip.Addr, error) {
	var out []netip.Addr
	err := eachInet6(list, func(r inet6Row) {
		if r.flags&ifaFDadFailed == 0 {
			out = append(out, r.addr)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inet6Row is one line of /proc/net/if_inet6.
type inet6Row struct {
	addr         netip.Addr
	scope, flags uint64
	iface        string
}

// eachInet6 calls row with each line of /proc/net/if_inet6: "ADDR IFINDEX
// PLEN SCOPE FLAGS NAME", numbers in hex. A line that cannot be read is an
// error naming it.
func eachInet6(list []byte, row func(inet6Row)) error {
	return eachRow(list, 6, func(lineNo int, f []string) error {
		a, err := parseHexAddr6(f[0])
		if err != nil {
			return fmt.Errorf("line %d: address %s: %w", lineNo, logline.QuoteClipped(f[0]), err)
		}
		scope, err1 := strconv.ParseUint(f[3], 16, 8)
		flags, err2 := strconv.ParseUint(f[4], 16, 32)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("line %d: scope %s, flags %s: want hex digits", lineNo, logline.QuoteClipped(f[3]), logline.QuoteClipped(f[4]))
		}
		row(inet6Row{addr: a, scope: scope, flags: flags, iface: f[5]})
		return nil
	})
}

// eachRow calls row with the fields of each line of a /proc table that has
// no header, skipping blank lines; a line without exactly n fields is an
// error naming it, as is row's. Every line is read: one that cannot be
// means the table cannot be trusted, after the answer too.
func eachRow(table []byte, n int, row func(lineNo int, fields []string) error) error {
	room := make([]string, 0, n)
	lineNo := 0
	for line := range strings.Lines(string(table)) {
		lineNo++
		fields, count := room[:0], 0
		for s := range strings.FieldsSeq(line) {
			if count < n {
				fields = append(fields, s)
			}
			count++
		}
		if count == 0 {
			continue
		}
		if count != n {
			return fmt.Errorf("line %d: %d fields, want %d", lineNo, count, n)
		}
		if err := row(lineNo, fields); err != nil {
			return err
		}
	}
	return nil
}

// parseHexAddr6 parses an IPv6 address written as 32 hex digits.
func parseHexAddr6(s string) (netip.Addr, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		return netip.Addr{}, errors.New("want 32 hex digits")
	}
	return netip.AddrFrom16([16]byte(b)), nil
}
