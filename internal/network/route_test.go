package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

const routeHeader = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"

// routeTable builds /proc/net/route content from the kernel's header and
// rows of "iface dest gateway flags metric mask".
func routeTable(rows ...string) string {
	var b strings.Builder
	b.WriteString(routeHeader + "\n")
	for _, r := range rows {
		f := strings.Fields(r)
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t0\t0\t%s\t%s\t0\t0\t0\n", f[0], f[1], f[2], f[3], f[4], f[5])
	}
	return b.String()
}

// defaultGatewayV4Tests is shared with the fuzzers as seeds. Addresses are
// written as a little-endian kernel prints them.
var defaultGatewayV4Tests = []struct {
	name    string
	table   string
	want    string // "" when an error is wanted
	wantErr string
}{
	{
		name:  "kind node",
		table: routeTable("eth0 00000000 010012AC 0003 0 00000000", "eth0 000012AC 00000000 0001 0 0000FFFF"),
		want:  "172.18.0.1",
	},
	{
		name:  "little-endian hex",
		table: routeTable("eth0 00000000 0100A8C0 0003 0 00000000"),
		want:  "192.168.0.1",
	},
	{
		name:  "lowest metric wins",
		table: routeTable("wlan0 00000000 0100A8C0 0003 600 00000000", "eth0 00000000 FE01A8C0 0003 100 00000000", "eth1 00000000 0102A8C0 0003 200 00000000"),
		want:  "192.168.1.254",
	},
	{
		name:  "tie: first wins",
		table: routeTable("eth0 00000000 0100A8C0 0003 100 00000000", "eth1 00000000 0101A8C0 0003 100 00000000"),
		want:  "192.168.0.1",
	},
	{
		// The kernel prints the u32 priority with %d.
		name:  "metrics of 2^31 and more print negative",
		table: routeTable("eth0 00000000 0100A8C0 0003 -1 00000000", "eth1 00000000 0101A8C0 0003 -2147483648 00000000", "eth2 00000000 0102A8C0 0003 2147483647 00000000"),
		want:  "192.168.2.1",
	},
	{
		name: "routes that are not a usable default",
		table: routeTable(
			"wg0 00000000 00000000 0001 0 00000000",  // default dev wg0: no gateway
			"eth0 00000000 0100A8C0 0201 0 00000000", // unreachable
			"eth0 00000000 0100A8C0 0002 0 00000000", // not up
			"eth0 00000000 00000000 0003 0 00000000", // gateway flag, no gateway
			"tun0 00000000 0108000A 0003 0 00000080", // 0.0.0.0/1, a VPN's half default
			"eth0 0000000A 0100A8C0 0003 0 000000FF", // 10.0.0.0/8
			"eth1 00000000 010012AC 0003 1000 00000000",
		),
		want: "172.18.0.1",
	},
	{
		name:  "columns found by name",
		table: "Iface Metric Gateway Flags Mask Destination\neth0 0 010012AC 0003 00000000 00000000\n",
		want:  "172.18.0.1",
	},
	{
		name:  "blank lines and no final newline",
		table: "\t" + routeHeader + "\n\n   \neth0\t00000000\t010012AC\t0003\t0\t0\t0\t00000000\t0\t0\t0",
		want:  "172.18.0.1",
	},
	{
		// No kernel has such a gateway, but a replayed table may: it
		// must not become the address resolv.conf and the DNS rules
		// send pods to (127.0.0.11 would be Docker's DNS itself).
		name: "gateways that are no host's address",
		table: routeTable(
			"eth0 00000000 0B00007F 0003 0 00000000", // 127.0.0.11
			"eth0 00000000 FFFFFFFF 0003 0 00000000", // broadcast
			"eth0 00000000 010000E0 0003 0 00000000", // 224.0.0.1
			"eth1 00000000 010012AC 0003 100 00000000",
		),
		want: "172.18.0.1",
	},
	{name: "only a loopback gateway", table: routeTable("eth0 00000000 0100007F 0003 0 00000000"), wantErr: "the IPv4 default route's gateway 127.0.0.1 is no host's address"},
	{name: "no default route", table: routeTable("eth0 000012AC 00000000 0001 0 0000FFFF"), wantErr: ErrNoDefaultRoute.Error()},
	{name: "header only", table: routeHeader + "\n", wantErr: ErrNoDefaultRoute.Error()},
	{name: "empty", table: "", wantErr: "line 1: no header"},
	{name: "blank first line", table: "\n" + routeTable("eth0 00000000 010012AC 0003 0 00000000"), wantErr: "line 1: no header"},
	{name: "header without Gateway", table: "Iface\tDestination\tFlags\tMetric\tMask\n", wantErr: "line 1: header has no Gateway column"},
	{name: "short line", table: routeHeader + "\neth0\t00000000\t010012AC\n", wantErr: "line 2: 3 fields, want at least 8"},
	{name: "gateway not hex", table: routeTable("eth0 00000000 0100A8CG 0003 0 00000000"), wantErr: `line 2: field Gateway "0100A8CG": want 8 hex digits`},
	{name: "gateway too short", table: routeTable("eth0 00000000 100A8C0 0003 0 00000000"), wantErr: `line 2: field Gateway "100A8C0": want 8 hex digits`},
	{name: "gateway with 0x", table: routeTable("eth0 00000000 0x00A8C0 0003 0 00000000"), wantErr: `line 2: field Gateway "0x00A8C0": want 8 hex digits`},
	{name: "destination signed", table: routeTable("eth0 -0000000 010012AC 0003 0 00000000"), wantErr: `line 2: field Destination "-0000000": want 8 hex digits`},
	{name: "mask bad", table: routeTable("eth0 00000000 010012AC 0003 0 FFFFFFFFF"), wantErr: `line 2: field Mask "FFFFFFFFF": want 8 hex digits`},
	{name: "flags bad", table: routeTable("eth0 00000000 010012AC 0x03 0 00000000"), wantErr: `line 2: field Flags "0x03": invalid syntax`},
	{name: "flags too big", table: routeTable("eth0 00000000 010012AC 10003 0 00000000"), wantErr: `line 2: field Flags "10003": value out of range`},
	{name: "metric bad", table: routeTable("eth0 00000000 010012AC 0003 1e3 00000000"), wantErr: `line 2: field Metric "1e3": want a 32-bit decimal integer`},
	{name: "metric too big", table: routeTable("eth0 00000000 010012AC 0003 4294967296 00000000"), wantErr: `line 2: field Metric "4294967296": want a 32-bit decimal integer`},
	{
		// A malformed line after the answer is still an error: the table
		// cannot be trusted.
		name:    "malformed later line",
		table:   routeTable("eth0 00000000 010012AC 0003 0 00000000", "eth1 00000000 zzzzzzzz 0003 0 00000000"),
		wantErr: `line 3: field Gateway "zzzzzzzz": want 8 hex digits`,
	},
	{name: "garbage", table: "\x00\xff\n\x00", wantErr: "line 1: header has no Destination column"},
	{name: "long field", table: routeTable("eth0 " + strings.Repeat("0", 100000) + " 010012AC 0003 0 00000000"), wantErr: `line 2: field Destination "` + strings.Repeat("0", 80) + `"...: want 8 hex digits`},
}

func TestDefaultGatewayV4(t *testing.T) {
	for _, tc := range defaultGatewayV4Tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := defaultGatewayV4([]byte(tc.table), binary.LittleEndian)
			checkGateway(t, got, err, tc.want, tc.wantErr)
		})
	}
}

// checkGateway checks a gateway lookup against a case: the error's text
// against wantErr, and the address against want ("" for none, so an
// address along with an error fails too).
func checkGateway(t *testing.T, got netip.Addr, err error, want, wantErr string) {
	t.Helper()
	addr := ""
	if got.IsValid() {
		addr = got.String()
	}
	hosttest.Result(t, "gateway", addr, err, want, wantErr)
}

func TestDefaultGatewayV4NoDefaultIsErrNoDefaultRoute(t *testing.T) {
	_, err := defaultGatewayV4([]byte(routeHeader+"\n"), binary.NativeEndian)
	if !errors.Is(err, ErrNoDefaultRoute) {
		t.Errorf("error %v is not ErrNoDefaultRoute", err)
	}
}

// TestDefaultGatewayV4BigEndian: on s390x the kernel's %08X of the same
// address reads in network order.
func TestDefaultGatewayV4BigEndian(t *testing.T) {
	got, err := defaultGatewayV4([]byte(routeTable("eth0 00000000 C0A80001 0003 0 00000000")), binary.BigEndian)
	checkGateway(t, got, err, "192.168.0.1", "")
}

// TestDefaultGatewayV4NativeEndian formats the table the way the kernel of
// the machine running the test would, whatever its byte order.
func TestDefaultGatewayV4NativeEndian(t *testing.T) {
	gw := fmt.Sprintf("%08X", binary.NativeEndian.Uint32([]byte{172, 18, 0, 1}))
	got, err := defaultGatewayV4([]byte(routeTable("eth0 00000000 "+gw+" 0003 0 00000000")), binary.NativeEndian)
	checkGateway(t, got, err, "172.18.0.1", "")
}

// TestDefaultGatewayV4Files reads tables copied from little-endian machines,
// with the kernel's padding to 127 columns.
func TestDefaultGatewayV4Files(t *testing.T) {
	for _, tc := range []struct {
		file    string
		want    string
		wantErr string
	}{
		{file: "route-kind-node.txt", want: "172.18.0.1"},
		{file: "route-laptop.txt", want: "192.168.1.1"},
		{file: "route-no-default.txt", wantErr: ErrNoDefaultRoute.Error()},
	} {
		t.Run(tc.file, func(t *testing.T) {
			table, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := defaultGatewayV4(table, binary.LittleEndian)
			checkGateway(t, got, err, tc.want, tc.wantErr)
		})
	}
}
