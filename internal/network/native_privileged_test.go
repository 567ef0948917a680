package network

// Privileged: Docker 29's native DNS redirect and our table for real, as
// root, with the machine's nft, in a network namespace of the test's own
// (the node) and a second one inside it (a pod), both gone with the test.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

// dockerTable is table ip docker-dns as Docker 29 writes it (moby's
// resolver_unix.go, setupNftablesNAT), for its resolver's ports.
func dockerTable(udp, tcp int) string {
	return fmt.Sprintf(`table ip docker-dns {
	chain dns-dnat {
		type nat hook output priority -100; policy accept;
		ip daddr 127.0.0.11 udp dport 53 counter dnat to 127.0.0.11:%[1]d
		ip daddr 127.0.0.11 tcp dport 53 counter dnat to 127.0.0.11:%[2]d
	}
	chain dns-snat {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr 127.0.0.11 udp sport %[1]d counter snat to :53
		ip saddr 127.0.0.11 tcp sport %[2]d counter snat to :53
	}
}
`, udp, tcp)
}

// TestNativeDNSInNamespace: with Docker's table in the node's namespace
// and a stand-in resolver at its ports, the plan's table ip kind-dns makes
// the host IP's port 53 answer over UDP and TCP, from the node and from a
// pod's namespace; planning again finds nothing to do; Docker's table is
// left as it was.
func TestNativeDNSInNamespace(t *testing.T) {
	nstest.SkipEmulated(t, "starts nft and ip, binaries of the machine's architecture, in namespaces of its own")
	for _, c := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s is not installed (test/unit/packages.sh installs it): %v", c, err)
		}
	}
	machine := func() (out string) {
		nstest.OnHost(func() { out = listRuleset(t) })
		return out
	}
	before := machine()
	nstest.Unshare(t, unix.CLONE_NEWNET|unix.CLONE_NEWNS)
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("a /run of the namespace's own (ip netns): %v", err)
	}
	const node, gateway, podNet, podAddr = "172.18.0.2/16", "172.18.0.1", "10.244.0.1/24", "10.244.0.5/24"
	for _, argv := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		// The node's network: a veth whose far end stays here.
		{"ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0-far"},
		{"ip", "addr", "add", node, "dev", "eth0"},
		{"ip", "link", "set", "eth0-far", "up"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "netns", "add", "pod"},
		{"ip", "link", "add", "vpod", "type", "veth", "peer", "name", "eth0", "netns", "pod"},
		{"ip", "addr", "add", podNet, "dev", "vpod"},
		{"ip", "link", "set", "vpod", "up"},
		{"ip", "-n", "pod", "link", "set", "lo", "up"},
		{"ip", "-n", "pod", "addr", "add", podAddr, "dev", "eth0"},
		{"ip", "-n", "pod", "link", "set", "eth0", "up"},
		{"ip", "-n", "pod", "route", "add", "default", "via", "10.244.0.1"},
	} {
		run(t, argv, nil)
	}
	// A pod's packets to an address on the node's loopback are routed
	// only with route_localnet: kube-proxy sets it (its iptables mode's
	// localhost node ports), and the script's iptables rules need it as
	// ours do (without it, measured here: the node's queries are
	// answered, the pod's time out). The sandbox's /proc is read-only: a
	// writable bind of /proc/sys/net in this mount namespace (a per-mount
	// flag; the namespace's sysctls are its own).
	for _, m := range []struct{ flags uintptr }{{unix.MS_BIND}, {unix.MS_BIND | unix.MS_REMOUNT}} {
		if err := unix.Mount("/proc/sys/net", "/proc/sys/net", "", m.flags, ""); err != nil {
			t.Fatalf("a writable /proc/sys/net: %v", err)
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/all/route_localnet", []byte("1\n"), 0); err != nil {
		t.Fatal(err)
	}

	udp, tcp := standInResolver(t)
	run(t, NftApplyArgv, []byte(dockerTable(udp, tcp)))
	docker := listTable(t, "docker-dns")

	ctx := context.Background()
	n := readNative(ctx, system.Linux{}, ProbeTimeout)
	if d, ok := n.Docker(); !ok || d.UDPPort != uint16(udp) || d.TCPPort != uint16(tcp) {
		t.Fatalf("the redirect read: %+v, %t (%v); want udp %d, tcp %d", d, ok, n.Err, udp, tcp)
	}
	host := netip.MustParseAddr(gateway)
	actions, served := planNativeDNS(n, host)
	if !served || len(actions) != 1 {
		t.Fatalf("planNativeDNS: %q, served %t", plan.Strings(actions), served)
	}
	if err := plan.Apply(ctx, system.Linux{}, logline.New(io.Discard, logline.Text), actions, false); err != nil {
		t.Fatal(err)
	}

	server := netip.AddrPortFrom(host, 53)
	for _, network := range []string{"udp", "tcp"} {
		if got, err := query(network, server); err != nil || got != network {
			t.Errorf("the node's query over %s to %s: %q, %v", network, server, got, err)
		}
	}
	pod, err := os.Open("/run/netns/pod")
	if err != nil {
		t.Fatal(err)
	}
	defer pod.Close()
	for _, network := range []string{"udp", "tcp"} {
		if got, err := queryIn(pod, network, server); err != nil || got != network {
			t.Errorf("a pod's query over %s to %s: %q, %v", network, server, got, err)
		}
	}

	// Planning again (a dry run on the booted node) finds our table.
	if again, served := planNativeDNS(readNative(ctx, system.Linux{}, ProbeTimeout), host); len(again) != 0 || !served {
		t.Errorf("planning again: %q, served %t; want nothing", plan.Strings(again), served)
	}
	// Applying twice replaces the table whole: one copy of each rule.
	if err := plan.Apply(ctx, system.Linux{}, logline.New(io.Discard, logline.Text), actions, false); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(listTable(t, NativeTable), "dnat to"); got != 4 {
		t.Errorf("after two applies, %d dnat rules in table ip %s; want 4", got, NativeTable)
	}
	if got := listTable(t, "docker-dns"); got != docker {
		t.Errorf("Docker's table changed:\n%s", nstest.DiffLines(docker, got))
	}
	if after := machine(); after != before {
		t.Errorf("the machine's ruleset changed:\n%s", nstest.DiffLines(before, after))
	}
}

// run runs argv in the test's namespaces, or fails the test.
func run(t *testing.T, argv []string, stdin []byte) {
	t.Helper()
	if _, stderr, err := (system.Linux{}).Run(context.Background(), argv, stdin, CommandTimeout); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, stderr)
	}
}

// listRuleset lists the ruleset without its counters (--stateless): the
// machine's own rules count its traffic while the test runs.
func listRuleset(t *testing.T) string {
	t.Helper()
	out, stderr, err := system.Linux{}.Run(context.Background(), []string{"nft", "--stateless", "list", "ruleset"}, nil, CommandTimeout)
	if err != nil {
		t.Fatalf("nft list ruleset: %v: %s", err, stderr)
	}
	return string(out)
}

// listTable lists a table without its counters, which queries change.
func listTable(t *testing.T, name string) string {
	t.Helper()
	out, stderr, err := system.Linux{}.Run(context.Background(), []string{"nft", "--stateless", "list", "table", "ip", name}, nil, CommandTimeout)
	if err != nil {
		t.Fatalf("nft list table ip %s: %v: %s", name, err, stderr)
	}
	return string(out)
}

// standInResolver answers every UDP datagram and every TCP connection on
// 127.0.0.11 at ports of its own with the protocol's name, until the test
// ends; it returns the ports.
func standInResolver(t *testing.T) (udpPort, tcpPort int) {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.11:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	ln, err := net.Listen("tcp4", "127.0.0.11:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte("udp"), from)
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("tcp"))
			c.Close()
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).Port, ln.Addr().(*net.TCPAddr).Port
}

// query sends one datagram (or opens one connection) to server and
// returns the answer.
func query(network string, server netip.AddrPort) (string, error) {
	c, err := net.DialTimeout(network, server.String(), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if network == "udp" {
		if _, err := c.Write([]byte("query")); err != nil {
			return "", err
		}
	}
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	return string(bytes.TrimSpace(buf[:n])), err
}

// queryIn is query from the network namespace ns, on a thread of its own
// that ends with it.
func queryIn(ns *os.File, network string, server netip.AddrPort) (answer string, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread, in another namespace, ends with
		// the goroutine.
		runtime.LockOSThread()
		if err = unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			return
		}
		answer, err = query(network, server)
	}()
	<-done
	return answer, err
}
