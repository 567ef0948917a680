package podnet

// The DNS forwarder (internal/dnsforward) in network namespaces: it lives
// here for the netlink wiring the preflight already has (a veth pair into
// a namespace of its own), which a test of the forwarder needs as much.

import (
	"context"
	"crypto/rand"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
	"github.com/kind-entrypoint/entrypoint/internal/dnsforward/dnstest"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

// The stand-in node's IPv6 address on its veth, the client's, and
// Docker's embedded DNS.
var (
	fwdNode   = netip.MustParseAddr("fd00:d15::1")
	fwdClient = netip.MustParseAddr("fd00:d15::2")
	embedded  = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.11"), 53)
)

// addr6 is an IPv6 address without duplicate address detection, so that
// it is usable at once.
func addr6(ip netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(64, 128)}, Flags: unix.IFA_F_NODAD}
}

// forwarderNamespaces moves the test into a new namespace, the node's: lo
// up, a stand-in for Docker's embedded DNS at 127.0.0.11:53, and a veth
// to a second namespace, the IPv6-only client's (no IPv4 address but
// loopback's). It returns the stand-in and both namespaces, open.
func forwarderNamespaces(t *testing.T) (up *dnstest.Server, nodeNS, clientNS netns.NsHandle) {
	t.Helper()
	nstest.RequireRoot(t)
	nstest.Unshare(t, unix.CLONE_NEWNET)
	for _, p := range []string{"all", "default"} {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+p+"/disable_ipv6", []byte("0"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if nodeNS, err = currentNS(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nodeNS.Close() })
	if clientNS, err = newNS(nodeNS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clientNS.Close() })

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(netlink.LinkAdd(newVeth("node0", "pod0")))
	for _, name := range []string{"lo", "node0", "pod0"} {
		l, err := linkByName(name)
		must(err)
		switch name {
		case "lo":
			must(netlink.LinkSetUp(l))
		case "node0":
			must(netlink.AddrAdd(l, addr6(fwdNode)))
			must(netlink.LinkSetUp(l))
		case "pod0":
			must(netlink.LinkSetNsFd(l, int(clientNS)))
		}
	}
	must(inNS(clientNS, func() error {
		for _, name := range []string{"lo", "pod0"} {
			l, err := linkByName(name)
			if err != nil {
				return err
			}
			if name == "pod0" {
				if err := netlink.AddrAdd(l, addr6(fwdClient)); err != nil {
					return err
				}
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		return nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(waitRunning(ctx, "node0"))
	must(inNS(clientNS, func() error { return waitRunning(ctx, "pod0") }))
	return dnstest.Start(t, embedded, 0), nodeNS, clientNS
}

// startForwarder runs a forwarder in the node's namespace (its sockets are
// made on the test's thread, there), dialing the upstream from there too.
func startForwarder(t *testing.T, nodeNS netns.NsHandle, lim dnsforward.Limits) *dnsforward.Forwarder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f, err := dnsforward.Listen(ctx, dnsforward.Config{
		Listen: netip.AddrPortFrom(fwdNode, 53), Upstream: embedded, Limits: lim,
		Dial: func(ctx context.Context, network, address string) (c net.Conn, err error) {
			err = inNS(nodeNS, func() error {
				var d net.Dialer
				c, err = d.DialContext(ctx, network, address)
				return err
			})
			return c, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx, time.Hour) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

// clientDial opens a connection from the client's namespace.
func clientDial(t *testing.T, clientNS netns.NsHandle, network string, to netip.AddrPort) net.Conn {
	t.Helper()
	var c net.Conn
	err := inNS(clientNS, func() error {
		var err error
		c, err = net.DialTimeout(network, to.String(), 2*time.Second)
		return err
	})
	if err != nil {
		t.Fatalf("client: dial %s %s: %v", network, to, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDNSForwarderIPv6Client: from an IPv6-only namespace, Docker's DNS at
// 127.0.0.11 cannot be reached (the control); through the forwarder at
// the node's IPv6 address it answers, over UDP and TCP.
func TestDNSForwarderIPv6Client(t *testing.T) {
	up, nodeNS, clientNS := forwarderNamespaces(t)
	q := dnstest.Query(1, "kind-control-plane")
	if _, err := dnstest.Exchange(clientDial(t, clientNS, "udp", embedded), q, 500*time.Millisecond); err == nil {
		t.Fatal("the IPv6-only client reached 127.0.0.11 without the forwarder: the namespaces are not what this test needs")
	}
	f := startForwarder(t, nodeNS, dnsforward.DefaultLimits())
	for _, network := range []string{"udp", "tcp"} {
		if _, err := dnstest.Exchange(clientDial(t, clientNS, network, f.Addr()), q, 2*time.Second); err != nil {
			t.Errorf("%s through the forwarder: %v", network, err)
		}
	}
	if got := up.Queries.Load(); got != 2 {
		t.Errorf("the stand-in answered %d queries, want 2", got)
	}
}

// TestDNSForwarderFlood: while garbage datagrams pour in and half-open TCP
// connections hold every slot, every well-formed query from the IPv6-only
// client is answered, and the forwarder holds no more buffers than its
// bound (2 + InFlight + Conns) and the heap stays under MemoryBound over
// what it was, plus 8 MiB for the test's own clients.
func TestDNSForwarderFlood(t *testing.T) {
	up, nodeNS, clientNS := forwarderNamespaces(t)
	lim := dnsforward.DefaultLimits()
	lim.InFlight, lim.Conns, lim.IdleTimeout = 32, 16, 2*time.Second
	// A heap close to what is live, so that its peak measures the bound.
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	f := startForwarder(t, nodeNS, lim)

	var peakHeap atomic.Uint64
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
		}
	})
	// Garbage: datagrams of every size shorter than a header, replies
	// (QR set) and random bytes, as fast as one sender goes.
	garbage := clientDial(t, clientNS, "udp", f.Addr())
	var sent atomic.Int64
	bg.Go(func() {
		reply := dnstest.Answer(dnstest.Query(9, "x"))
		junk := make([]byte, 1200)
		rand.Read(junk)
		junk[5] = 0 // no question: never a query, whatever the rest
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var b []byte
			switch i % 3 {
			case 0:
				b = junk[:i%12]
			case 1:
				b = reply
			default:
				b = junk[:100+i%1000]
			}
			garbage.Write(b)
			sent.Add(1)
		}
	})
	// Half-open connections: 3 times the cap, some with half a frame.
	for i := range 3 * lim.Conns {
		c := clientDial(t, clientNS, "tcp", f.Addr())
		if i%2 == 0 {
			c.Write([]byte{0, 200, 1})
		}
	}
	const udpClients, udpEach, tcpQueries = 8, 25, 20
	var wg sync.WaitGroup
	var failures, retried atomic.Int64
	for i := range udpClients {
		c := clientDial(t, clientNS, "udp", f.Addr())
		wg.Go(func() {
			for j := range udpEach {
				// As a stub resolver does: a datagram the kernel
				// dropped with the flood (its queue full before the
				// forwarder read it) is asked again.
				q := dnstest.Query(uint16(i*1000+j), "kind-control-plane")
				var err error
				for try := range 3 {
					if _, err = dnstest.Exchange(c, q, time.Second); err == nil {
						break
					}
					if try == 0 {
						retried.Add(1)
					}
				}
				if err != nil {
					t.Errorf("UDP client %d, query %d, 3 tries: %v", i, j, err)
					failures.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for j := range tcpQueries {
			c := clientDial(t, clientNS, "tcp", f.Addr())
			if _, err := dnstest.Exchange(c, dnstest.Query(uint16(60000+j), "kind-control-plane"), 3*time.Second); err != nil {
				t.Errorf("TCP query %d: %v", j, err)
				failures.Add(1)
			}
			c.Close()
		}
	})
	wg.Wait()
	close(stop)
	bg.Wait()

	got := f.Stats()
	t.Logf("%d garbage datagrams sent, %d dropped by the kernel before the forwarder read them; %d UDP queries asked again; counts %+v; heap in use peaked %d KiB over %d KiB (bound %d KiB)",
		sent.Load(), sent.Load()-got.Garbage, retried.Load(), got, (peakHeap.Load()-base)>>10, base>>10, lim.MemoryBound()>>10)
	// Every query the forwarder read was answered: none failed, none
	// was dropped for want of a slot.
	if got.Failed > 0 || got.Busy > 0 {
		t.Errorf("queries read but not answered: %+v", got)
	}
	if got.UDP < udpClients*udpEach || got.TCP < tcpQueries || failures.Load() > 0 {
		t.Errorf("answered UDP %d of %d, TCP %d of %d", got.UDP, udpClients*udpEach, got.TCP, tcpQueries)
	}
	if got.Garbage == 0 || got.Evicted == 0 {
		t.Errorf("the flood did not reach the forwarder: %+v", got)
	}
	if max := int64(lim.MemoryBound() / dnsforward.MaxMessage); got.PeakBuffers > max {
		t.Errorf("%d buffers held at once, over the bound of %d", got.PeakBuffers, max)
	}
	if over := peakHeap.Load() - min(base, peakHeap.Load()); over > uint64(lim.MemoryBound())+8<<20 {
		t.Errorf("the heap grew by %d KiB, over the bound of %d KiB + 8 MiB", over>>10, lim.MemoryBound()>>10)
	}
	if up.Queries.Load() < int64(udpClients*udpEach+tcpQueries) {
		t.Errorf("the stand-in answered %d queries", up.Queries.Load())
	}
}
