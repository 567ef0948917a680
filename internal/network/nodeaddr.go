package network

// This file holds how the node finds its own address of each family,
// which enable_network_magic follows after a restart.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// nodeAddr is the node's own address of network ("ip4" or "ip6"). First,
// as kind's script (`getent ahostsv4 $(hostname)`), the first usable
// answer for its name: that is the address Docker writes in the node's
// /etc/hosts, and every golden plan keeps it. When the name gives none,
// the address on the default route's interface (routeAddr), and iface
// names that interface: where the name does not resolve (nerdctl's
// rootless nodes after a restart, kind #3989) the script found no address
// and either stopped or left the old one in the node's files.
//
// err says why the name gave no address; with no address either, it adds
// why the default route's interface gave none.
func nodeAddr(ctx context.Context, sys system.System, timeout time.Duration, network, hostname string) (addr netip.Addr, iface string, err error) {
	if hostname == "" {
		err = errors.New("the node has no hostname")
	} else if addr, err = lookupFirst(ctx, sys, timeout, network, hostname, true); err == nil {
		return addr, "", nil
	}
	addr, iface, routeErr := routeAddr(sys, network)
	switch {
	case addr.IsValid():
		return addr, iface, err
	case routeErr != nil:
		return netip.Addr{}, "", fmt.Errorf("%w; %w", err, routeErr)
	}
	return netip.Addr{}, "", err
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
