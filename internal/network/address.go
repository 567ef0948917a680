package network

import (
	"bytes"
	"fmt"
	"net/netip"
)

// ReplaceAddress replaces every whole-word occurrence of the IP address old
// in content with new, and reports how many it replaced. It never writes an
// empty or invalid address: old and new must both be valid IP addresses (per
// net/netip) of one family, without a zone, and neither unspecified nor
// loopback, since node configs are full of 0.0.0.0 and 127.0.0.1 that must
// never be rewritten or written, nor multicast or broadcast (no node's
// address). old == new changes nothing and reports 0.
//
// The reference used sed's \b, which treats '.' and ':' as boundaries: after
// a restart moved a node from 172.18.0.3 to 172.18.0.4 it also rewrote
// 10.172.18.0.3, and for IPv6 fc00::3 it rewrote fc00::3:1. Here an
// occurrence is whole only when the byte on each side is not a word byte: an
// ASCII letter or digit, '_', '.' or ':' (letters beyond a-f count, as for
// \b, so "v172.18.0.3" is left alone too). So "172.18.0.30",
// "10.172.18.0.3", "fc00::30" and "fc00::3:1" never match, while
// "https://172.18.0.3:6443", "--advertise-address=172.18.0.3",
// "- 172.18.0.3", "172.18.0.3/32" and "[fc00::3]:6443" do.
//
// The port colon: a ':' right after an IPv4 address is a boundary, because
// an IPv4 address is never followed by more address text, only by a port
// ("172.18.0.3:6443"). A ':' before an IPv4 address is not, as that is the
// tail of an IPv6 address ("::ffff:172.18.0.3"). An IPv6 address with a port
// is written in brackets ("[fc00::3]:6443"), and brackets are boundaries; an
// unbracketed "fc00::3:6443" is the address fc00::3:6443 and is left alone.
//
// old is matched in exactly the spelling given, byte for byte (the files
// carry the same canonical text as the tools that recorded old), so
// "FC00::3" does not match "fc00::3". It is never a pattern: "172.18.0.3"
// does not match "172x18x0x3", and "172.18.0.*" is refused as not an address.
func ReplaceAddress(content []byte, old, new string) (out []byte, n int, err error) {
	oldAddr, err := parseNodeAddress("old", old)
	if err != nil {
		return nil, 0, err
	}
	newAddr, err := parseNodeAddress("new", new)
	if err != nil {
		return nil, 0, err
	}
	if oldAddr.Is4() != newAddr.Is4() {
		return nil, 0, fmt.Errorf("cannot replace %s with %s: different address families", old, new)
	}
	if old == new {
		return content, 0, nil
	}

	is4 := oldAddr.Is4()
	pattern := []byte(old)
	last := 0
	for i := 0; ; {
		j := bytes.Index(content[i:], pattern)
		if j < 0 {
			break
		}
		start, end := i+j, i+j+len(pattern)
		if !isWholeAddress(content, start, end, is4) {
			i = start + 1
			continue
		}
		out = append(out, content[last:start]...)
		out = append(out, new...)
		last, i = end, end
		n++
	}
	if n == 0 {
		return content, 0, nil
	}
	return append(out, content[last:]...), n, nil
}

// parseNodeAddress validates an address that is (or replaces) a node's own
// address. role names it in errors.
func parseNodeAddress(role, s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fmt.Errorf("%s address is empty", role)
	}
	addr, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, fmt.Errorf("%s address: %w", role, err)
	case addr.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%s address %s: has a zone", role, s)
	case addr.IsUnspecified():
		return netip.Addr{}, fmt.Errorf("%s address %s: unspecified address", role, s)
	case addr.IsLoopback():
		return netip.Addr{}, fmt.Errorf("%s address %s: loopback address", role, s)
	case !UsableHostIP(addr):
		return netip.Addr{}, fmt.Errorf("%s address %s: not a host's address", role, s)
	}
	return addr, nil
}

// isWholeAddress reports whether content[start:end], an occurrence of an
// address, stands on its own; see ReplaceAddress.
func isWholeAddress(content []byte, start, end int, is4 bool) bool {
	if start > 0 && isAddressWordByte(content[start-1]) {
		return false
	}
	if end < len(content) {
		if c := content[end]; isAddressWordByte(c) && !(is4 && c == ':') {
			return false
		}
	}
	return true
}

func isAddressWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':'
}

// UsableHostIP reports whether an answer for host.docker.internal can be
// the Docker host pods send DNS to: not the node's own loopback, and not
// an address that names no host (0.0.0.0, a broadcast or multicast
// address), which would become DNAT rules and a resolv.conf nameserver.
func UsableHostIP(a netip.Addr) bool {
	return a.IsValid() && !a.IsLoopback() && !a.IsUnspecified() && !a.IsMulticast() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}
