package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// ErrNoDefaultRoute is returned by defaultGatewayV4 when the table is well
// formed but has no usable IPv4 default route.
var ErrNoDefaultRoute = errors.New("no IPv4 default route with a gateway")

// Route flags from <linux/route.h>.
const (
	rtfUp      = 0x0001
	rtfGateway = 0x0002
	rtfReject  = 0x0200
)

// defaultGatewayV4 returns the gateway of the IPv4 default route from the
// content of /proc/net/route, printed in the byte order order (see
// parseRoutesV4: the machine's own, binary.NativeEndian, but for tests).
//
// It stands in for the reference's `ip -4 route show default`, without
// needing iproute2. A default route is one with destination and mask 0 that
// is up, has a gateway that is a host's address (UsableHostIP) and is not a
// reject (unreachable/prohibit) route. Of
// several, the lowest metric wins, as in the kernel's lookup, and a tie goes
// to the first listed, the order in which the kernel tries them. Columns are
// found by the header's names. A line that cannot be read is an error naming
// the line and field, since skipping it could mean skipping the real default
// route; callers add the file name.
func defaultGatewayV4(table []byte, order binary.ByteOrder) (netip.Addr, error) {
	routes, err := parseRoutesV4(table, order)
	if err != nil {
		return netip.Addr{}, err
	}
	var best, unusable netip.Addr
	var bestMetric uint32
	for _, r := range routes {
		if !r.isDefault() || r.gateway.IsUnspecified() || r.flags&rtfGateway == 0 {
			continue
		}
		if !UsableHostIP(r.gateway) {
			// No kernel takes a loopback, multicast or broadcast
			// gateway; a replayed table may hold one, and it must not
			// become where pods are sent for DNS.
			if !unusable.IsValid() {
				unusable = r.gateway
			}
			continue
		}
		if best.IsValid() && r.metric >= bestMetric {
			continue
		}
		best, bestMetric = r.gateway, r.metric
	}
	switch {
	case best.IsValid():
		return best, nil
	case unusable.IsValid():
		return netip.Addr{}, fmt.Errorf("the IPv4 default route's gateway %s is no host's address", unusable)
	}
	return netip.Addr{}, ErrNoDefaultRoute
}

// routeV4 is one row of /proc/net/route.
type routeV4 struct {
	iface         string // "" when the table has no Iface column
	dest, gateway netip.Addr
	// bits is the mask's prefix length, -1 when the mask is not one.
	bits   int
	flags  uint64
	metric uint32
}

// isDefault reports whether r is a default route that is up and no reject
// (unreachable, prohibit) route.
func (r routeV4) isDefault() bool {
	return r.dest.IsUnspecified() && r.bits == 0 && r.flags&rtfUp != 0 && r.flags&rtfReject == 0
}

// parseRoutesV4 reads the rows of /proc/net/route, in order. The kernel
// prints each address (a network-order __be32) with %08X, i.e. as the
// host-order integer it reads from memory: "0100A8C0" is 192.168.0.1 on
// little-endian machines and 1.0.168.192 on big-endian ones; order is that
// of the machine that printed the table.
func parseRoutesV4(table []byte, order binary.ByteOrder) ([]routeV4, error) {
	// The columns read, found by the header's names (the first of a name
	// given twice); col holds their indexes, in names' order. Iface is
	// optional: only the interface of the default route needs it.
	const (
		destination = iota
		gateway
		flags
		metric
		mask
		iface
	)
	names := [...]string{"Destination", "Gateway", "Flags", "Metric", "Mask", "Iface"}
	col := [len(names)]int{-1, -1, -1, -1, -1, -1}

	header, rest, _ := strings.Cut(string(table), "\n")
	n := 0
	for name := range strings.FieldsSeq(header) {
		if j := slices.Index(names[:], name); j >= 0 && col[j] < 0 {
			col[j] = n
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("line 1: no header")
	}
	minFields := 0
	for j, name := range names {
		if col[j] < 0 && j != iface {
			return nil, fmt.Errorf("line 1: header has no %s column", name)
		}
		minFields = max(minFields, col[j]+1)
	}

	var routes []routeV4
	// One line's fields, in an array reused for every line.
	var room [16]string
	lineNo := 1
	for line := range strings.SplitSeq(rest, "\n") {
		lineNo++
		fields := slices.AppendSeq(room[:0], strings.FieldsSeq(line))
		if len(fields) == 0 {
			continue
		}
		if len(fields) < minFields {
			return nil, fmt.Errorf("line %d: %d fields, want at least %d", lineNo, len(fields), minFields)
		}
		field := func(j int) string { return fields[col[j]] }
		bad := func(j int, err error) error {
			return fmt.Errorf("line %d: field %s %s: %w", lineNo, names[j], logline.QuoteClipped(field(j)), err)
		}
		var a [3][4]byte // destination, gateway, mask: 8 hex digits each
		for i, j := range [3]int{destination, gateway, mask} {
			v, err := strconv.ParseUint(field(j), 16, 32)
			if err != nil || len(field(j)) != 8 {
				return nil, bad(j, errors.New("want 8 hex digits"))
			}
			order.PutUint32(a[i][:], uint32(v))
		}
		fl, err := strconv.ParseUint(field(flags), 16, 16)
		if err != nil {
			return nil, bad(flags, errors.Unwrap(err))
		}
		met, err := parseRouteMetric(field(metric))
		if err != nil {
			return nil, bad(metric, err)
		}
		r := routeV4{dest: netip.AddrFrom4(a[0]), gateway: netip.AddrFrom4(a[1]), bits: maskBits(a[2]),
			flags: fl, metric: met}
		if col[iface] >= 0 {
			r.iface = field(iface)
		}
		routes = append(routes, r)
	}
	return routes, nil
}

// maskBits is the prefix length of a network mask, -1 when it is none
// (its ones are not all leading).
func maskBits(m [4]byte) int {
	v := binary.BigEndian.Uint32(m[:])
	ones := bits.OnesCount32(v)
	if v != ^uint32(0)<<(32-ones) {
		return -1
	}
	return ones
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
