package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// nodeAddrFiles are the /proc/net files of a kind node at 172.18.0.4 and
// fc00:f853:ccd:e793::4 on eth0, in this machine's byte order.
func nodeAddrFiles() (files map[string]string, noDefault4 string) {
	v4 := fmt.Sprintf("%08X", binary.NativeEndian.Uint32([]byte{172, 18, 0, 1}))
	net4 := fmt.Sprintf("%08X", binary.NativeEndian.Uint32([]byte{172, 18, 0, 0}))
	mask := fmt.Sprintf("%08X", binary.NativeEndian.Uint32([]byte{255, 255, 0, 0}))
	return map[string]string{
		"proc/net/route":      routeTable("eth0 00000000 "+v4+" 0003 0 00000000", "eth0 "+net4+" 00000000 0001 0 "+mask),
		"proc/net/fib_trie":   fibTrieKind,
		"proc/net/ipv6_route": ipv6Tests[0].routes,
		"proc/net/if_inet6":   ipv6Tests[0].addrs,
	}, routeTable("eth0 " + net4 + " 00000000 0001 0 " + mask)
}

// with is files with more's pairs (path, content) set, a "-" content
// removing the path.
func with(files map[string]string, more ...string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[k] = v
	}
	for i := 0; i+1 < len(more); i += 2 {
		if more[i+1] == "-" {
			delete(out, more[i])
			continue
		}
		out[more[i]] = more[i+1]
	}
	return out
}

// TestNodeAddr: the name's answer first, as the script, when it is one of
// the node's own addresses or those cannot be read; the default route's
// interface when the name gives none, or a stale one; a missing file adds
// nothing to the name's answer.
func TestNodeAddr(t *testing.T) {
	routes, noDefault4 := nodeAddrFiles()
	const stale = "kind-control-plane 172.18.0.3 fc00:f853:ccd:e793::3\n"
	for _, tc := range []struct {
		name     string
		files    map[string]string
		hostname string
		want     [2]string // per family: "ADDR IFACE[: ERROR]" or "none: ERROR"
	}{
		{
			name:  "the name resolves to the node's addresses",
			files: with(routes, ".host/hosts", "kind-control-plane 172.18.0.4 fc00:f853:ccd:e793::4\n"), hostname: "kind-control-plane",
			want: [2]string{"172.18.0.4 ", "fc00:f853:ccd:e793::4 "},
		},
		{
			// As before the node's addresses were read: a tree that did
			// not record them plans as it did.
			name: "the name resolves, the node's addresses unknown",
			files: with(routes, ".host/hosts", "kind-control-plane 172.18.0.9 fc00::9\n",
				"proc/net/fib_trie", "-", "proc/net/if_inet6", "-"), hostname: "kind-control-plane",
			want: [2]string{"172.18.0.9 ", "fc00::9 "},
		},
		{
			name:  "the name resolves to stale addresses",
			files: with(routes, ".host/hosts", stale), hostname: "kind-control-plane",
			want: [2]string{"172.18.0.4 eth0: kind-control-plane resolves to 172.18.0.3, on no interface of this node",
				"fc00:f853:ccd:e793::4 eth0: kind-control-plane resolves to fc00:f853:ccd:e793::3, on no interface of this node"},
		},
		{
			// The first answer decides, as the script's: it is stale, and
			// the default route's interface gives the node's address.
			name:  "a stale first answer, the node's address second",
			files: with(routes, ".host/hosts", stale+"kind-control-plane 172.18.0.4 fc00:f853:ccd:e793::4\n"), hostname: "kind-control-plane",
			want: [2]string{"172.18.0.4 eth0: kind-control-plane resolves to 172.18.0.3, on no interface of this node",
				"fc00:f853:ccd:e793::4 eth0: kind-control-plane resolves to fc00:f853:ccd:e793::3, on no interface of this node"},
		},
		{
			name:  "stale, no default routes: kept, with why",
			files: with(routes, ".host/hosts", stale, "proc/net/route", noDefault4, "proc/net/ipv6_route", ""), hostname: "kind-control-plane",
			want: [2]string{"172.18.0.3 : kind-control-plane resolves to 172.18.0.3, on no interface of this node; /proc/net/route: no IPv4 default route",
				"fc00:f853:ccd:e793::3 : kind-control-plane resolves to fc00:f853:ccd:e793::3, on no interface of this node; /proc/net/ipv6_route: no IPv6 default route"},
		},
		{
			name:  "stale, no route tables: kept",
			files: with(routes, ".host/hosts", stale, "proc/net/route", "-", "proc/net/ipv6_route", "-"), hostname: "kind-control-plane",
			want: [2]string{"172.18.0.3 : kind-control-plane resolves to 172.18.0.3, on no interface of this node",
				"fc00:f853:ccd:e793::3 : kind-control-plane resolves to fc00:f853:ccd:e793::3, on no interface of this node"},
		},
		{
			name:  "the name does not resolve",
			files: routes, hostname: "kind-control-plane",
			want: [2]string{"172.18.0.4 eth0: lookup kind-control-plane: no such host", "fc00:f853:ccd:e793::4 eth0: lookup kind-control-plane: no such host"},
		},
		{
			// Loopback is no usable answer: never compared with lo's.
			name:  "the name is loopback only",
			files: with(routes, ".host/hosts", "kind-control-plane 127.0.1.1 ::1\n"), hostname: "kind-control-plane",
			want: [2]string{"172.18.0.4 eth0: kind-control-plane has no usable IPv4 address", "fc00:f853:ccd:e793::4 eth0: kind-control-plane has no usable IPv6 address"},
		},
		{
			name:  "no hostname",
			files: routes,
			want:  [2]string{"172.18.0.4 eth0: the node has no hostname", "fc00:f853:ccd:e793::4 eth0: the node has no hostname"},
		},
		{
			name:  "missing files add nothing",
			files: with(routes, "proc/net/fib_trie", "-", "proc/net/if_inet6", "-"), hostname: "kind-control-plane",
			want: [2]string{"none: lookup kind-control-plane: no such host", "none: lookup kind-control-plane: no such host"},
		},
		{
			name:  "no default routes",
			files: with(routes, "proc/net/route", noDefault4, "proc/net/ipv6_route", ""), hostname: "kind-control-plane",
			want: [2]string{"none: lookup kind-control-plane: no such host; /proc/net/route: no IPv4 default route",
				"none: lookup kind-control-plane: no such host; /proc/net/ipv6_route: no IPv6 default route"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := hosttest.Tree(t, tc.files)
			for i, network := range []string{"ip4", "ip6"} {
				a := nodeAddr(t.Context(), sys, time.Second, network, tc.hostname)
				addr, iface, err := a.Addr, a.Iface, a.Err
				got := addr.String() + " " + iface
				if err != nil {
					got += ": " + err.Error()
				}
				if !addr.IsValid() {
					got = "none: " + err.Error()
				}
				if got != tc.want[i] {
					t.Errorf("%s: got %q, want %q", network, got, tc.want[i])
				}
				var stale *StaleAddrError
				if errors.As(err, &stale) != strings.Contains(tc.want[i], "on no interface") {
					t.Errorf("%s: error %#v: a *StaleAddrError only for a stale answer", network, err)
				}
			}
		})
	}
}

// TestLocalAddrs: whether an answer is one of the node's own addresses,
// and when that cannot be told (nil: the name's answer stands).
func TestLocalAddrs(t *testing.T) {
	const (
		lo6  = "00000000000000000000000000000001 01 80 10 80       lo\n"
		new6 = "fc00f8530ccde7930000000000000004 2a 40 00 80     eth0\n"
	)
	for _, tc := range []struct {
		name, network, file, content string // content "-": no file; "/": a directory
		addr                         string
		want                         string // "local", "stale" or "unknown"
	}{
		{name: "the node's address", network: "ip4", file: "proc/net/fib_trie", content: fibTrieKind, addr: "172.18.0.4", want: "local"},
		{name: "the old address", network: "ip4", file: "proc/net/fib_trie", content: fibTrieKind, addr: "172.18.0.3", want: "stale"},
		{name: "the network's broadcast", network: "ip4", file: "proc/net/fib_trie", content: fibTrieKind, addr: "172.18.255.255", want: "stale"},
		{name: "the network's own leaf", network: "ip4", file: "proc/net/fib_trie", content: fibTrieKind, addr: "172.18.0.0", want: "stale"},
		{name: "an address of another interface", network: "ip4", file: "proc/net/fib_trie",
			content: fibTrieKind + "  |-- 10.9.0.2\n     /32 host LOCAL\n", addr: "10.9.0.2", want: "local"},
		{name: "no fib_trie", network: "ip4", file: "proc/net/fib_trie", content: "-", addr: "172.18.0.3", want: "unknown"},
		{name: "fib_trie unreadable", network: "ip4", file: "proc/net/fib_trie", content: "/", addr: "172.18.0.3", want: "unknown"},
		{name: "fib_trie empty", network: "ip4", file: "proc/net/fib_trie", content: "", addr: "172.18.0.3", want: "unknown"},
		{name: "fib_trie of an unknown shape", network: "ip4", file: "proc/net/fib_trie", content: "Main:\n  172.18.0.4 LOCAL\n", addr: "172.18.0.3", want: "unknown"},

		{name: "the node's IPv6 address", network: "ip6", file: "proc/net/if_inet6", content: ipv6Tests[0].addrs, addr: "fc00:f853:ccd:e793::4", want: "local"},
		{name: "the old IPv6 address", network: "ip6", file: "proc/net/if_inet6", content: ipv6Tests[0].addrs, addr: "fc00:f853:ccd:e793::3", want: "stale"},
		{name: "link-local", network: "ip6", file: "proc/net/if_inet6", content: ipv6Tests[0].addrs, addr: "fe80::42:acff:fe12:4", want: "local"},
		{name: "tentative", network: "ip6", file: "proc/net/if_inet6", content: lo6 + "fc00f8530ccde7930000000000000004 2a 40 00 40     eth0\n", addr: "fc00:f853:ccd:e793::4", want: "local"},
		{name: "duplicate address detection failed", network: "ip6", file: "proc/net/if_inet6", content: lo6 + "fc00f8530ccde7930000000000000004 2a 40 00 88     eth0\n", addr: "fc00:f853:ccd:e793::4", want: "stale"},
		{name: "another interface", network: "ip6", file: "proc/net/if_inet6", content: lo6 + "fc00f8530ccde7930000000000000004 2b 40 00 80     eth1\n", addr: "fc00:f853:ccd:e793::4", want: "local"},
		{name: "no if_inet6", network: "ip6", file: "proc/net/if_inet6", content: "-", addr: "fc00:f853:ccd:e793::3", want: "unknown"},
		{name: "if_inet6 empty", network: "ip6", file: "proc/net/if_inet6", content: "", addr: "fc00:f853:ccd:e793::3", want: "unknown"},
		{name: "if_inet6 torn", network: "ip6", file: "proc/net/if_inet6", content: lo6 + new6 + "fc00f8530ccde79300\n", addr: "fc00:f853:ccd:e793::3", want: "unknown"},
		{name: "if_inet6 unreadable", network: "ip6", file: "proc/net/if_inet6", content: "/", addr: "fc00:f853:ccd:e793::3", want: "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			switch tc.content {
			case "-":
			case "/":
				files[tc.file+"/x"] = ""
			default:
				files[tc.file] = tc.content
			}
			local := localAddrs(hosttest.Tree(t, files), tc.network)
			got := "stale"
			switch {
			case local == nil:
				got = "unknown"
			case slices.Contains(local, netip.MustParseAddr(tc.addr)):
				got = "local"
			}
			if got != tc.want {
				t.Errorf("%s: got %s, want %s (addresses %v)", tc.addr, got, tc.want, local)
			}
		})
	}
}

func TestLocalAddrsV6(t *testing.T) {
	got, err := localAddrsV6([]byte(ipv6Tests[1].addrs))
	hosttest.Result(t, "addresses", fmt.Sprint(got), err, "[fc00:f853:ccd:e793::9 fc00:f853:ccd:e793::6]", "")
	// The lines refused for the default route's interface are refused here
	// too.
	refused := 0
	for _, tc := range ipv6Tests {
		want, ok := strings.CutPrefix(tc.wantErr, ProcNetIfInet6+": line ")
		if !ok {
			continue
		}
		refused++
		_, err := localAddrsV6([]byte(tc.addrs))
		if got := hosttest.ErrString(err); got != "line "+want {
			t.Errorf("%s: error %q, want %q", tc.name, got, "line "+want)
		}
	}
	if refused < 2 {
		t.Errorf("%d torn if_inet6 tables in ipv6Tests, want 2", refused)
	}
}

func FuzzLocalAddrsV6(f *testing.F) {
	for _, tc := range ipv6Tests {
		f.Add([]byte(tc.addrs))
	}
	f.Fuzz(func(t *testing.T, list []byte) {
		addrs, err := localAddrsV6(list)
		if err != nil && addrs != nil {
			t.Fatalf("%v along with error %v", addrs, err)
		}
		for _, a := range addrs {
			if !a.Is6() || !strings.Contains(string(list), hexAddr6(a)) {
				t.Fatalf("%v is no address of the input", a)
			}
		}
	})
}

// hexAddr6 is a as if_inet6 writes it.
func hexAddr6(a netip.Addr) string {
	b := a.As16()
	return fmt.Sprintf("%x", b[:])
}

// BenchmarkLocalAddrs: the node's own addresses from fib_trie and
// if_inet6 of n addresses each, none the answer. Time grows with n.
func BenchmarkLocalAddrs(b *testing.B) {
	for _, n := range []int{10000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var trie, list strings.Builder
			for i := range n {
				fmt.Fprintf(&trie, "  |-- 10.%d.%d.%d\n     /32 host LOCAL\n", i>>16&255, i>>8&255, i&255)
				fmt.Fprintf(&list, "fc00%028x 2a 40 00 80     eth0\n", i)
			}
			sys := hosttest.Tree(b, map[string]string{"proc/net/fib_trie": trie.String(), "proc/net/if_inet6": list.String()})
			b.SetBytes(int64(trie.Len() + list.Len()))
			v4, v6 := netip.MustParseAddr("172.18.0.3"), netip.MustParseAddr("fc00:f853:ccd:e793::3")
			for b.Loop() {
				if slices.Contains(localAddrs(sys, "ip4"), v4) || slices.Contains(localAddrs(sys, "ip6"), v6) {
					b.Fatal("found the answer")
				}
			}
		})
	}
}

// TestSourceWarning: the boot's WARN for each way nodeAddr may find an
// address other than the script's, and none for the script's.
func TestSourceWarning(t *testing.T) {
	old, cur := netip.MustParseAddr("172.18.0.3"), netip.MustParseAddr("172.18.0.4")
	noRoute := errors.New("/proc/net/route: no IPv4 default route")
	for _, tc := range []struct {
		name  string
		cur   netip.Addr
		iface string
		why   error
		want  string
	}{
		{name: "the name's answer", cur: cur},
		{name: "no address", why: errors.New("lookup kind-control-plane: no such host")},
		{
			name: "unresolved", cur: cur, iface: "eth0", why: errors.New("lookup kind-control-plane: no such host"),
			want: "the node's name gives no IPv4 address (lookup kind-control-plane: no such host); using 172.18.0.4, the address on the default route's interface eth0",
		},
		{
			name: "stale", cur: cur, iface: "eth0", why: &StaleAddrError{Name: "kind-control-plane", Addr: old},
			want: "the node's name gives 172.18.0.3, an IPv4 address on no interface of this node (a stale entry in /etc/hosts or the engine's DNS); using 172.18.0.4, the address on the default route's interface eth0",
		},
		{
			name: "stale, kept", cur: old, why: &StaleAddrError{Name: "kind-control-plane", Addr: old, Route: noRoute},
			want: "the node's name gives 172.18.0.3, an IPv4 address on no interface of this node (a stale entry in /etc/hosts or the engine's DNS), and the default route's interface gives none (/proc/net/route: no IPv4 default route); using 172.18.0.3 all the same",
		},
		{
			name: "stale, kept, no route table", cur: old, why: &StaleAddrError{Name: "kind-control-plane", Addr: old},
			want: "the node's name gives 172.18.0.3, an IPv4 address on no interface of this node (a stale entry in /etc/hosts or the engine's DNS), and the default route's interface gives none; using 172.18.0.3 all the same",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sourceWarning("IPv4", NodeAddr{Addr: tc.cur, Iface: tc.iface, Err: tc.why}); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
