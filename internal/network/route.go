package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// ErrNoDefaultRoute is returned by DefaultGatewayV4 when the table is well
// formed but has no usable IPv4 default route.
var ErrNoDefaultRoute = errors.New("no IPv4 default route with a gateway")

// Route flags from <linux/route.h>.
const (
	rtfUp      = 0x0001
	rtfGateway = 0x0002
	rtfReject  = 0x0200
)

// DefaultGatewayV4 returns the gateway of the IPv4 default route from the content of /proc/net/route.
//
// It stands in for the reference's `ip -4 route show default`, without
// needing iproute2. A default route is one with destination and mask 0 that
// is up, has a gateway and is not a reject (unreachable/prohibit) route. Of
// several, the lowest metric wins, as in the kernel's lookup, and a tie goes
// to the first listed, the order in which the kernel tries them. Columns are
// found by the header's names. A line that cannot be read is an error naming
// the line and field, since skipping it could mean skipping the real default
// route; callers add the file name.
func DefaultGatewayV4(procNetRoute []byte) (netip.Addr, error) {
	return defaultGatewayV4(procNetRoute, binary.NativeEndian)
}

// defaultGatewayV4 is DefaultGatewayV4 with the byte order of the table made
// explicit. The kernel prints each address (a network-order __be32) with
// %08X, i.e. as the host-order integer it reads from memory: "0100A8C0" is
// 192.168.0.1 on little-endian machines and 1.0.168.192 on big-endian ones.
// Tests use this to cover both.
func defaultGatewayV4(table []byte, order binary.ByteOrder) (netip.Addr, error) {
	lines := strings.Split(string(table), "\n")
	header := strings.Fields(lines[0])
	if len(header) == 0 {
		return netip.Addr{}, errors.New("line 1: no header")
	}
	column := make(map[string]int, len(header))
	for i, name := range header {
		if _, dup := column[name]; !dup {
			column[name] = i
		}
	}
	minFields := 0
	for _, name := range []string{"Destination", "Gateway", "Flags", "Metric", "Mask"} {
		i, ok := column[name]
		if !ok {
			return netip.Addr{}, fmt.Errorf("line 1: header has no %s column", name)
		}
		minFields = max(minFields, i+1)
	}

	var best netip.Addr
	var bestMetric uint32
	for n, line := range lines[1:] {
		lineNo := n + 2
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < minFields {
			return netip.Addr{}, fmt.Errorf("line %d: %d fields, want at least %d", lineNo, len(fields), minFields)
		}
		field := func(name string) string { return fields[column[name]] }
		bad := func(name string, err error) error {
			return fmt.Errorf("line %d: field %s %q: %w", lineNo, name, field(name), err)
		}
		dest, err := parseRouteHex(field("Destination"))
		if err != nil {
			return netip.Addr{}, bad("Destination", err)
		}
		gateway, err := parseRouteHex(field("Gateway"))
		if err != nil {
			return netip.Addr{}, bad("Gateway", err)
		}
		mask, err := parseRouteHex(field("Mask"))
		if err != nil {
			return netip.Addr{}, bad("Mask", err)
		}
		flags, err := strconv.ParseUint(field("Flags"), 16, 16)
		if err != nil {
			return netip.Addr{}, bad("Flags", errors.Unwrap(err))
		}
		metric, err := parseRouteMetric(field("Metric"))
		if err != nil {
			return netip.Addr{}, bad("Metric", err)
		}

		if dest != 0 || mask != 0 || gateway == 0 ||
			flags&(rtfUp|rtfGateway) != rtfUp|rtfGateway || flags&rtfReject != 0 {
			continue
		}
		if best.IsValid() && metric >= bestMetric {
			continue
		}
		var b [4]byte
		order.PutUint32(b[:], gateway)
		best, bestMetric = netip.AddrFrom4(b), metric
	}
	if !best.IsValid() {
		return netip.Addr{}, ErrNoDefaultRoute
	}
	return best, nil
}

// parseRouteHex parses an address or mask column: always 8 hex digits.
func parseRouteHex(s string) (uint32, error) {
	if len(s) != 8 {
		return 0, errors.New("want 8 hex digits")
	}
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil {
		return 0, errors.New("want 8 hex digits")
	}
	return uint32(v), nil
}

// parseRouteMetric parses the Metric column. The kernel keeps the priority
// as a u32 but prints it with %d, so priorities of 2^31 and more appear
// negative; they are mapped back so that comparisons stay right.
func parseRouteMetric(s string) (uint32, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < math.MinInt32 || v > math.MaxUint32 {
		return 0, errors.New("want a 32-bit decimal integer")
	}
	return uint32(v), nil
}
