package network

// This file holds how the node finds its own address of each family,
// which enable_network_magic follows after a restart.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// NodeAddr is the node's address of one family (see nodeAddr), and the
// one recorded at the last boot.
type NodeAddr struct {
	// Addr is the first usable answer for the node's name, else the
	// address on the default route's interface, which Iface then names;
	// invalid when the node has none. Err says why the name gave none,
	// and with no address, why the interface gave none either. A
	// *StaleAddrError says the name's answer is on no interface of the
	// node; with an address and no Iface, that answer is kept.
	Addr  netip.Addr
	Iface string
	Err   error
	// Old is the address recorded at the last boot (blanks trimmed), nil
	// when there is no record.
	Old *string
}

// nodeAddr is the node's own address of network ("ip4" or "ip6"). First,
// as kind's script (`getent ahostsv4 $(hostname)`), the first usable
// answer for its name: that is the address Docker writes in the node's
// /etc/hosts, and every golden plan keeps it. When the name gives none,
// the address on the default route's interface (routeAddr), and iface
// names that interface: where the name does not resolve (nerdctl's
// rootless nodes after a restart, kind #3989) the script found no address
// and either stopped or left the old one in the node's files.
//
// The name's answer must also be one of the node's own addresses, when
// those can be read (localAddrs): an answer on no interface of the node
// (an engine that kept an old /etc/hosts entry after a restart with a new
// address) is stale, and the default route's interface gives the address
// instead; err is then a *StaleAddrError. With no address there either,
// the stale answer is kept, with a *StaleAddrError naming why.
//
// Err says why the name gave no address; with no address either, it adds
// why the default route's interface gave none.
func nodeAddr(ctx context.Context, sys system.System, timeout time.Duration, network, hostname string) NodeAddr {
	var addr netip.Addr
	var err error
	if hostname == "" {
		err = errors.New("the node has no hostname")
	} else if addr, err = lookupFirst(ctx, sys, timeout, network, hostname, true); err == nil {
		if local := localAddrs(sys, network); local == nil || slices.Contains(local, addr) {
			return NodeAddr{Addr: addr}
		}
		stale := &StaleAddrError{Name: hostname, Addr: addr}
		routed, iface, routeErr := routeAddr(sys, network)
		if routed.IsValid() {
			return NodeAddr{Addr: routed, Iface: iface, Err: stale}
		}
		stale.Route = routeErr
		return NodeAddr{Addr: addr, Err: stale}
	}
	addr, iface, routeErr := routeAddr(sys, network)
	switch {
	case addr.IsValid():
		return NodeAddr{Addr: addr, Iface: iface, Err: err}
	case routeErr != nil:
		return NodeAddr{Err: fmt.Errorf("%w; %w", err, routeErr)}
	}
	return NodeAddr{Err: err}
}

// StaleAddrError says that the node's name resolves to an address on no
// interface of the node.
type StaleAddrError struct {
	Name string
	Addr netip.Addr
	// Route is why the default route's interface gave no address either,
	// when the stale answer is kept; nil when it gave one, or when its
	// files do not exist.
	Route error
}

func (e *StaleAddrError) Error() string {
	s := fmt.Sprintf("%s resolves to %s, on no interface of this node", e.Name, e.Addr)
	if e.Route != nil {
		s += "; " + e.Route.Error()
	}
	return s
}

func (e *StaleAddrError) Unwrap() error { return e.Route }

// localAddrs returns the node's own addresses of network: the local /32
// entries of /proc/net/fib_trie (IPv4), the addresses of
// /proc/net/if_inet6 (IPv6). It returns nil when they cannot be known, and
// the name's answer then stands as the script's does: the file does not
// exist (a captured tree that did not record it), cannot be read or
// parsed, or lists no address at all (not even loopback's, which every
// network namespace holds: a format these parsers do not know).
func localAddrs(sys system.System, network string) []netip.Addr {
	// A file that cannot be read is nil, as one that does not exist, and
	// its parser gives no address: nil all the same.
	if network == "ip4" {
		b, _ := system.ReadOptional(sys, ProcNetFibTrie, system.LimitTable)
		return localAddrsV4(b)
	}
	b, _ := system.ReadOptional(sys, ProcNetIfInet6, system.LimitTable)
	addrs, _ := localAddrsV6(b) // nil when it cannot be parsed
	return addrs
}

// routeAddr returns the node's address of network on the interface of
// the default route of that family, and that interface. It reports no
// address and no error when a file it needs does not exist: there is then
// nothing to add to the name's answer (IPv6 disabled: no ipv6_route; a
// captured tree that did not record the file).
//
// IPv4: /proc/net/route names the default route's interface and the
// networks connected to it; /proc/net/fib_trie lists the node's own
// addresses (the kernel has no per-interface address file for IPv4); the
// first of those in a connected network is the one. IPv6:
// /proc/net/ipv6_route and /proc/net/if_inet6, which names each address's
// interface.
func routeAddr(sys system.System, network string) (netip.Addr, string, error) {
	files := []string{ProcNetRoute, ProcNetFibTrie}
	if network == "ip6" {
		files = []string{ProcNetIPv6Route, ProcNetIfInet6}
	}
	var data [2][]byte
	for i, p := range files {
		b, err := system.ReadOptional(sys, p, system.LimitTable)
		if err != nil {
			return netip.Addr{}, "", err
		}
		if b == nil {
			return netip.Addr{}, "", nil
		}
		data[i] = b
	}
	if network == "ip6" {
		return routeAddrV6(data[0], data[1])
	}
	return routeAddrV4(data[0], data[1], binary.NativeEndian)
}
