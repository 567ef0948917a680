package network

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// fibTrieKind is /proc/net/fib_trie of a kind node at 172.18.0.4, as a
// kernel with merged main and local tables prints it: both sections.
const fibTrieKind = `Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 172.18.0.0/16 2 0 2
        +-- 172.18.0.0/29 2 0 2
           |-- 172.18.0.0
              /16 link UNICAST
           |-- 172.18.0.4
              /32 host LOCAL
        |-- 172.18.255.255
           /32 link BROADCAST
Local:
  +-- 127.0.0.0/8 2 0 2
     +-- 127.0.0.0/31 1 0 0
        |-- 127.0.0.1
           /32 host LOCAL
  +-- 172.18.0.0/16 2 0 2
        |-- 172.18.0.4
           /32 host LOCAL
`

// localAddrsV4Tests are shared with the fuzzer as seeds.
var localAddrsV4Tests = []struct {
	name string
	trie string
	want []string
}{
	{name: "kind node, both tables", trie: fibTrieKind, want: []string{"127.0.0.1", "172.18.0.4"}},
	{name: "empty", trie: "", want: nil},
	{
		name: "two addresses, in order, a second entry on a leaf",
		trie: "Main:\n  |-- 10.0.0.9\n     /24 link UNICAST\n     /32 host LOCAL\n  |-- 10.0.0.2\n     /32 host LOCAL\n",
		want: []string{"10.0.0.9", "10.0.0.2"},
	},
	{
		// A torn leaf line: its entry is no one's.
		name: "torn leaf",
		trie: "Main:\n  |-- 172.18.0\n     /32 host LOCAL\n  |-- 172.18.0.4\n     /32 host LOCAL\n",
		want: []string{"172.18.0.4"},
	},
	{
		// A line of another shape ends the leaf above it.
		name: "entry after another line",
		trie: "Main:\n  |-- 172.18.0.3\n  +-- 172.18.0.0/16 2 0 2\n     /32 host LOCAL\n",
		want: nil,
	},
	{
		name: "not LOCAL, not /32, torn entry",
		trie: "  |-- 172.18.0.255\n     /32 link BROADCAST\n  |-- 10.0.0.0\n     /8 host LOCAL\n  |-- 10.0.0.1\n     /32 host\n  |-- 10.0.0.2\n     /32 host LOCAL extra\n",
		want: nil,
	},
	{name: "an IPv6 leaf", trie: "  |-- ::1\n     /32 host LOCAL\n", want: nil},
	{name: "duplicated lines", trie: strings.Repeat("  |-- 10.1.2.3\n     /32 host LOCAL\n", 3), want: []string{"10.1.2.3"}},
	{name: "CRLF", trie: "Main:\r\n  |-- 10.1.2.3\r\n     /32 host LOCAL\r\n", want: []string{"10.1.2.3"}},
}

func TestLocalAddrsV4(t *testing.T) {
	for _, tc := range localAddrsV4Tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range localAddrsV4([]byte(tc.trie)) {
				got = append(got, a.String())
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
}

// routeAddrV4Tests: a /proc/net/route (little-endian) and a fib_trie, and
// the address on the default route's interface. Shared with the fuzzer.
var routeAddrV4Tests = []struct {
	name, table, trie string
	want, wantIface   string // "" when an error is wanted
	wantErr           string
}{
	{
		name:  "kind node",
		table: routeTable("eth0 00000000 010012AC 0003 0 00000000", "eth0 000012AC 00000000 0001 0 0000FFFF"),
		trie:  fibTrieKind, want: "172.18.0.4", wantIface: "eth0",
	},
	{
		// The address of the other interface is not taken, nor one on
		// eth0's interface outside its networks.
		name: "the default route's interface, lowest metric",
		table: routeTable("wlan0 00000000 0100A8C0 0003 600 00000000", "eth0 00000000 0100000A 0003 100 00000000",
			"wlan0 0000A8C0 00000000 0001 600 00FFFFFF", "eth0 0000000A 00000000 0001 100 00FFFFFF"),
		trie: "  |-- 192.168.0.7\n     /32 host LOCAL\n  |-- 10.0.0.5\n     /32 host LOCAL\n",
		want: "10.0.0.5", wantIface: "eth0",
	},
	{
		// default dev tun0: no gateway, still the default route.
		name:  "default without a gateway",
		table: routeTable("tun0 00000000 00000000 0001 0 00000000", "tun0 0000640A 00000000 0001 0 00FFFFFF"),
		trie:  "  |-- 10.100.0.2\n     /32 host LOCAL\n", want: "10.100.0.2", wantIface: "tun0",
	},
	{
		name:  "a reject default is none",
		table: routeTable("eth0 00000000 010012AC 0203 0 00000000", "eth0 000012AC 00000000 0001 0 0000FFFF"),
		trie:  fibTrieKind, wantErr: "/proc/net/route: no IPv4 default route",
	},
	{
		name:  "no default route",
		table: routeTable("eth0 000012AC 00000000 0001 0 0000FFFF"),
		trie:  fibTrieKind, wantErr: "/proc/net/route: no IPv4 default route",
	},
	{
		name:  "no connected network",
		table: routeTable("eth0 00000000 010012AC 0003 0 00000000"),
		trie:  fibTrieKind, wantErr: "eth0, the default route's interface, has no address of its networks in /proc/net/fib_trie",
	},
	{
		name:    "no local address there",
		table:   routeTable("eth0 00000000 010012AC 0003 0 00000000", "eth0 000012AC 00000000 0001 0 0000FFFF"),
		trie:    "  |-- 172.18.255.255\n     /32 link BROADCAST\n  |-- 10.0.0.1\n     /32 host LOCAL\n",
		wantErr: "eth0, the default route's interface, has no address of its networks in /proc/net/fib_trie",
	},
	{
		name:  "no Iface column",
		table: "Destination Gateway Flags Metric Mask\n00000000 010012AC 0003 0 00000000\n",
		trie:  fibTrieKind, wantErr: "/proc/net/route: line 1: header has no Iface column",
	},
}

func TestRouteAddrV4(t *testing.T) {
	for _, tc := range routeAddrV4Tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, iface, err := routeAddrV4([]byte(tc.table), []byte(tc.trie), binary.LittleEndian)
			got := ""
			if addr.IsValid() {
				got = addr.String() + " " + iface
			}
			want := ""
			if tc.want != "" {
				want = tc.want + " " + tc.wantIface
			}
			hosttest.Result(t, "address", got, err, want, tc.wantErr)
		})
	}
}

// ipv6Route is one /proc/net/ipv6_route line: destination, prefix length,
// next hop, metric, flags and interface, the rest as the kernel prints it.
func ipv6Route(dest, plen, via, metric, flags, iface string) string {
	return fmt.Sprintf("%s %s %032x 00 %s %s 00000001 00000000 %s %8s\n", dest, plen, 0, via, metric, flags, iface)
}

const (
	zero6 = "00000000000000000000000000000000"
	gw6   = "fc00f8530ccde7930000000000000001"
)

// ipv6Tests: /proc/net/ipv6_route and /proc/net/if_inet6, and the address
// on the default route's interface. Shared with the fuzzer.
var ipv6Tests = []struct {
	name, routes, addrs string
	want, wantErr       string
}{
	{
		name: "kind node",
		routes: ipv6Route("fc00f8530ccde7930000000000000000", "40", zero6, "00000100", "00000001", "eth0") +
			ipv6Route(zero6, "00", gw6, "00000400", "00000003", "eth0") +
			ipv6Route(zero6, "00", zero6, "ffffffff", "00200200", "lo"),
		addrs: "00000000000000000000000000000001 01 80 10 80       lo\n" +
			"fe800000000000000042acfffe120004 2a 40 20 80     eth0\n" +
			"fc00f8530ccde7930000000000000004 2a 40 00 80     eth0\n",
		want: "fc00:f853:ccd:e793::4 eth0",
	},
	{
		name: "lowest metric; a failed DAD and another interface's address skipped",
		routes: ipv6Route(zero6, "00", gw6, "00000400", "00000003", "eth1") +
			ipv6Route(zero6, "00", gw6, "00000100", "00000003", "eth0"),
		addrs: "fc00f8530ccde7930000000000000009 2a 40 00 80     eth1\n" +
			"fc00f8530ccde7930000000000000005 2a 40 00 88     eth0\n" +
			"fc00f8530ccde7930000000000000006 2c8 40 00 c0     eth0\n",
		want: "fc00:f853:ccd:e793::6 eth0",
	},
	{name: "only lo's unreachable default", routes: ipv6Route(zero6, "00", zero6, "ffffffff", "00200200", "lo"), wantErr: "/proc/net/ipv6_route: no IPv6 default route"},
	{name: "not up", routes: ipv6Route(zero6, "00", gw6, "00000400", "00000002", "eth0"), wantErr: "/proc/net/ipv6_route: no IPv6 default route"},
	{name: "empty", wantErr: "/proc/net/ipv6_route: no IPv6 default route"},
	{
		name:    "no global address",
		routes:  ipv6Route(zero6, "00", gw6, "00000400", "00000003", "eth0"),
		addrs:   "fe800000000000000042acfffe120004 2a 40 20 80     eth0\n",
		wantErr: "/proc/net/if_inet6: eth0, the default route's interface, has no global IPv6 address",
	},
	{
		name:    "torn route line",
		routes:  ipv6Route(zero6, "00", gw6, "00000400", "00000003", "eth0") + zero6 + " 00 " + zero6[:10] + "\n",
		wantErr: "/proc/net/ipv6_route: line 2: 3 fields, want 10",
	},
	{name: "route hex", routes: ipv6Route(zero6, "0x", gw6, "00000400", "00000003", "eth0"), wantErr: `/proc/net/ipv6_route: line 1: field 2 "0x": want hex digits`},
	{name: "route destination", routes: ipv6Route(zero6[:31]+"g", "00", gw6, "00000400", "00000003", "eth0"), wantErr: `/proc/net/ipv6_route: line 1: destination "` + zero6[:31] + `g": want 32 hex digits`},
	{
		name:    "torn address line after the answer",
		routes:  ipv6Route(zero6, "00", gw6, "00000400", "00000003", "eth0"),
		addrs:   "fc00f8530ccde7930000000000000004 2a 40 00 80     eth0\nfc00f8530ccde79300\n",
		wantErr: "/proc/net/if_inet6: line 2: 1 fields, want 6",
	},
	{
		name:    "address flags",
		routes:  ipv6Route(zero6, "00", gw6, "00000400", "00000003", "eth0"),
		addrs:   "fc00f8530ccde7930000000000000004 2a 40 00 zz     eth0\n",
		wantErr: `/proc/net/if_inet6: line 1: scope "00", flags "zz": want hex digits`,
	},
	{
		name:   "duplicated lines",
		routes: strings.Repeat(ipv6Route(zero6, "00", gw6, "00000400", "00000003", "eth0"), 3),
		addrs:  strings.Repeat("fc00f8530ccde7930000000000000004 2a 40 00 80     eth0\n", 3),
		want:   "fc00:f853:ccd:e793::4 eth0",
	},
}

func TestRouteAddrV6(t *testing.T) {
	for _, tc := range ipv6Tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, iface, err := routeAddrV6([]byte(tc.routes), []byte(tc.addrs))
			got := ""
			if addr.IsValid() {
				got = addr.String() + " " + iface
			}
			hosttest.Result(t, "address", got, err, tc.want, tc.wantErr)
		})
	}
}

func FuzzLocalAddrsV4(f *testing.F) {
	for _, tc := range localAddrsV4Tests {
		f.Add([]byte(tc.trie))
	}
	f.Fuzz(func(t *testing.T, trie []byte) {
		seen := map[string]bool{}
		for _, a := range localAddrsV4(trie) {
			if !a.Is4() || seen[a.String()] {
				t.Fatalf("%v: not IPv4, or listed twice", a)
			}
			seen[a.String()] = true
			if !strings.Contains(string(trie), "|-- "+a.String()) {
				t.Fatalf("%v is no leaf of the input", a)
			}
		}
	})
}

func FuzzRouteAddrV4(f *testing.F) {
	for _, tc := range routeAddrV4Tests {
		f.Add([]byte(tc.table), []byte(tc.trie))
	}
	f.Fuzz(func(t *testing.T, table, trie []byte) {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			addr, iface, err := routeAddrV4(table, trie, order)
			switch {
			case err != nil && (addr.IsValid() || iface != ""):
				t.Fatalf("got %v on %q along with error %v", addr, iface, err)
			case err == nil && (!addr.Is4() || !UsableHostIP(addr) || iface == ""):
				t.Fatalf("address %v on %q is not a usable IPv4 address on an interface", addr, iface)
			case err == nil && !strings.Contains(string(trie), "|-- "+addr.String()):
				t.Fatalf("%v is not in the trie", addr)
			}
		}
	})
}

func FuzzRouteAddrV6(f *testing.F) {
	for _, tc := range ipv6Tests {
		f.Add([]byte(tc.routes), []byte(tc.addrs))
	}
	f.Fuzz(func(t *testing.T, routes, addrs []byte) {
		addr, iface, err := routeAddrV6(routes, addrs)
		switch {
		case err != nil && (addr.IsValid() || iface != ""):
			t.Fatalf("got %v on %q along with error %v", addr, iface, err)
		case err == nil && (!addr.Is6() || addr.Is4In6() || !UsableHostIP(addr) || iface == "" || iface == "lo"):
			t.Fatalf("address %v on %q is not a usable IPv6 address on an interface", addr, iface)
		case err == nil && !strings.Contains(string(addrs), iface):
			t.Fatalf("interface %q is not in if_inet6", iface)
		}
	})
}

// BenchmarkRouteAddrV4 is the worst case of a hostile table: n connected
// networks of every prefix length on the default route's interface and n
// local addresses outside all of them. Time grows with n, not n².
func BenchmarkRouteAddrV4(b *testing.B) {
	for _, n := range []int{10000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rows := []string{"eth0 00000000 0100000A 0003 0 00000000"}
			var trie strings.Builder
			for i := range n {
				bits := 8 + i%24
				m := ^uint32(0) << (32 - bits)
				var mb, db [4]byte
				binary.BigEndian.PutUint32(mb[:], m)
				binary.BigEndian.PutUint32(db[:], (10<<24|uint32(i)<<8)&m)
				rows = append(rows, fmt.Sprintf("eth0 %08X 00000000 0001 0 %08X",
					binary.LittleEndian.Uint32(db[:]), binary.LittleEndian.Uint32(mb[:])))
				fmt.Fprintf(&trie, "  |-- 192.168.%d.%d\n     /32 host LOCAL\n", i/250%250, i%250+1)
			}
			table, tr := []byte(routeTable(rows...)), []byte(trie.String())
			b.SetBytes(int64(len(table) + len(tr)))
			for b.Loop() {
				if _, _, err := routeAddrV4(table, tr, binary.LittleEndian); err == nil {
					b.Fatal("found an address outside every network")
				}
			}
		})
	}
}
