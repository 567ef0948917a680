package network

import "net/netip"

// UsableHostIP reports whether an answer for host.docker.internal can be
// the Docker host pods send DNS to: not the node's own loopback, and not
// an address that names no host (0.0.0.0, a broadcast or multicast
// address), which would become DNAT rules and a resolv.conf nameserver.
func UsableHostIP(a netip.Addr) bool {
	return a.IsValid() && !a.IsLoopback() && !a.IsUnspecified() && !a.IsMulticast() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// unusableWhy says why UsableHostIP refused a valid address.
func unusableWhy(a netip.Addr) string {
	if a.IsLoopback() {
		return "is loopback " + a.String()
	}
	return "answers " + a.String() + ", which names no host"
}
