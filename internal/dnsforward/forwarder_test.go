package dnsforward_test

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
	"github.com/kind-entrypoint/entrypoint/internal/dnsforward/dnstest"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

var (
	loop6 = netip.AddrPortFrom(netip.IPv6Loopback(), 0)
	loop4 = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0)
)

// started is a forwarder on ::1 to an upstream on 127.0.0.1, as on a node
// (IPv6 in front, IPv4 behind), with its log.
type started struct {
	*dnsforward.Forwarder
	log  *syncBuffer
	stop func()
}

func start(t *testing.T, upstream netip.AddrPort, lim dnsforward.Limits) *started {
	t.Helper()
	return startOn(t, loop6, upstream, lim)
}

// startOn is start on listen: 127.0.0.1, for tests whose clients come
// from several addresses (127.0.0.2, 127.0.0.3: loopback has one IPv6
// address, but all of 127/8).
func startOn(t *testing.T, listen, upstream netip.AddrPort, lim dnsforward.Limits) *started {
	t.Helper()
	log := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	f, err := dnsforward.Listen(ctx, dnsforward.Config{Listen: listen, Upstream: upstream, Limits: lim, Log: logline.New(log, logline.Text)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx, time.Hour) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &started{f, log, stop}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func dial(t *testing.T, network string, addr netip.AddrPort) net.Conn {
	t.Helper()
	return dialFrom(t, network, netip.Addr{}, addr)
}

// dialFrom is dial from the address from (the zero Addr: any).
func dialFrom(t *testing.T, network string, from netip.Addr, addr netip.AddrPort) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second}
	if from.IsValid() {
		local := netip.AddrPortFrom(from, 0)
		if network == "tcp" {
			d.LocalAddr = net.TCPAddrFromAddrPort(local)
		} else {
			d.LocalAddr = net.UDPAddrFromAddrPort(local)
		}
	}
	c, err := d.Dial(network, addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestForwardsUDPAndTCP(t *testing.T) {
	up := dnstest.Start(t, loop4, 0)
	f := start(t, up.Addr, dnsforward.DefaultLimits())
	u := dial(t, "udp", f.Addr())
	for id := range uint16(3) {
		if _, err := dnstest.Exchange(u, dnstest.Query(id, "kind-control-plane"), time.Second); err != nil {
			t.Fatalf("UDP query %d: %v", id, err)
		}
	}
	c := dial(t, "tcp", f.Addr())
	for id := range uint16(3) {
		// A connection carries several queries, one after the other.
		if _, err := dnstest.Exchange(c, dnstest.Query(100+id, "example.com"), time.Second); err != nil {
			t.Fatalf("TCP query %d: %v", id, err)
		}
	}
	f.stop()
	got := f.Stats()
	if got.UDP != 3 || got.TCP != 3 || got.Failed != 0 || got.Garbage != 0 {
		t.Errorf("counts %+v, want 3 UDP and 3 TCP answered, nothing else", got)
	}
	if got.Buffers != 0 {
		t.Errorf("%d buffers still out after Serve returned", got.Buffers)
	}
	log := f.log.String()
	for _, want := range []string{
		"INFO: dns-forwarder: answering DNS on [::1]:",
		"forwarding to " + up.Addr.String(),
		"INFO: dns-forwarder: stopping; since the last report: 6 queries answered (UDP 3, TCP 3)\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestDropsWhatIsNotAQuery(t *testing.T) {
	up := dnstest.Start(t, loop4, 0)
	f := start(t, up.Addr, dnsforward.DefaultLimits())
	u := dial(t, "udp", f.Addr())
	reply := dnstest.Answer(dnstest.Query(7, "x"))
	for _, garbage := range [][]byte{{}, {1}, make([]byte, 11), reply} {
		if _, err := u.Write(garbage); err != nil {
			t.Fatal(err)
		}
	}
	// Answered after the garbage: the reader went on.
	if _, err := dnstest.Exchange(u, dnstest.Query(8, "x"), time.Second); err != nil {
		t.Fatal(err)
	}
	// A TCP frame shorter than a header ends its connection.
	c := dial(t, "tcp", f.Addr())
	if _, err := c.Write([]byte{0, 3, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := dnstest.ReadAll(c, 2*time.Second); err != nil {
		t.Errorf("connection with a short frame: %v, want closed", err)
	}
	f.stop()
	if got := f.Stats(); got.Garbage != 5 || got.UDP != 1 || up.Queries.Load() != 1 {
		t.Errorf("counts %+v, upstream asked %d times; want 5 dropped, 1 forwarded", got, up.Queries.Load())
	}
}

func TestUpstreamDown(t *testing.T) {
	// A port nothing listens on: the upstream refuses (ICMP port
	// unreachable), and the client gets no reply.
	l, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(loop4))
	if err != nil {
		t.Fatal(err)
	}
	down := l.LocalAddr().(*net.UDPAddr).AddrPort()
	l.Close()
	f := start(t, down, dnsforward.DefaultLimits())
	u := dial(t, "udp", f.Addr())
	if _, err := dnstest.Exchange(u, dnstest.Query(1, "x"), 300*time.Millisecond); err == nil {
		t.Fatal("answered with the upstream down")
	}
	c := dial(t, "tcp", f.Addr())
	if _, err := dnstest.Exchange(c, dnstest.Query(2, "x"), 2*time.Second); err == nil {
		t.Fatal("answered over TCP with the upstream down")
	}
	f.stop()
	got := f.Stats()
	if got.Failed != 2 || !strings.Contains(got.LastErr, "refused") {
		t.Errorf("counts %+v, want 2 failed (connection refused)", got)
	}
	if !strings.Contains(f.log.String(), "WARN: dns-forwarder: stopping; since the last report: 0 queries answered (UDP 0, TCP 0), 2 failed (last: ") {
		t.Errorf("log:\n%s", f.log.String())
	}
}

func TestInFlightCap(t *testing.T) {
	up := dnstest.Start(t, loop4, 300*time.Millisecond)
	lim := dnsforward.DefaultLimits()
	lim.InFlight = 2
	f := start(t, up.Addr, lim)
	var wg sync.WaitGroup
	answered := make([]bool, 5)
	for i := range answered {
		u := dial(t, "udp", f.Addr())
		wg.Go(func() {
			_, err := dnstest.Exchange(u, dnstest.Query(uint16(i), "x"), time.Second)
			answered[i] = err == nil
		})
		time.Sleep(20 * time.Millisecond) // in this order
	}
	wg.Wait()
	f.stop()
	n := 0
	for _, ok := range answered {
		if ok {
			n++
		}
	}
	got := f.Stats()
	if n != 2 || got.Busy != 3 || got.PeakBuffers > 1+2 {
		t.Errorf("%d answered, counts %+v; want 2 answered, 3 dropped as busy, at most 3 buffers", n, got)
	}
}

// TestHalfOpenConnections fills every TCP slot with connections that send
// nothing or half a frame: a new client still gets its answer (the
// longest idle is closed for it), and the idle ones are closed after
// IdleTimeout.
func TestHalfOpenConnections(t *testing.T) {
	up := dnstest.Start(t, loop4, 0)
	lim := dnsforward.DefaultLimits()
	lim.Conns, lim.IdleTimeout = 4, 500*time.Millisecond
	f := start(t, up.Addr, lim)
	var half []net.Conn
	for i := range 2 * lim.Conns {
		c := dial(t, "tcp", f.Addr())
		if i%2 == 1 {
			c.Write([]byte{0, 40, 1, 2, 3}) // a frame's first bytes
		}
		half = append(half, c)
	}
	for id := range uint16(3) {
		c := dial(t, "tcp", f.Addr())
		if _, err := dnstest.Exchange(c, dnstest.Query(id, "x"), time.Second); err != nil {
			t.Fatalf("query %d with every slot held: %v", id, err)
		}
		c.Close()
	}
	for i, c := range half {
		if err := dnstest.ReadAll(c, 3*lim.IdleTimeout); err != nil {
			t.Errorf("half-open connection %d: %v, want closed", i, err)
		}
	}
	f.stop()
	got := f.Stats()
	if got.TCP != 3 || got.Evicted+got.Idle < int64(len(half)) || got.PeakBuffers > int64(1+lim.Conns) {
		t.Errorf("counts %+v: want 3 answered, the %d half-open ones evicted or timed out, at most %d buffers", got, len(half), 1+lim.Conns)
	}
}

func TestProbe(t *testing.T) {
	up := dnstest.Start(t, loop4, 0)
	f := start(t, up.Addr, dnsforward.DefaultLimits())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := dnsforward.Probe(ctx, f.Addr(), "kind-control-plane"); err != nil {
		t.Fatal(err)
	}
	if _, err := dnsforward.NewQuery(1, strings.Repeat("a", 64)+".b"); err == nil {
		t.Error("a 64-byte label was encoded")
	}
	q, err := dnsforward.NewQuery(0x1234, "a.bc.")
	want := []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 2, 'b', 'c', 0, 0, 28, 0, 1}
	if err != nil || !bytes.Equal(q, want) {
		t.Errorf("NewQuery: %x, %v; want %x", q, err, want)
	}
}

// TestTCPUpstreamClosed: the upstream closes its connection after each
// answer; the client's next query on the same connection is sent again on
// a new one, and answered.
func TestTCPUpstreamClosed(t *testing.T) {
	up := dnstest.StartWith(t, loop4, dnstest.Behaviour{OneQuery: true})
	f := start(t, up.Addr, dnsforward.DefaultLimits())
	c := dial(t, "tcp", f.Addr())
	for id := range uint16(4) {
		if _, err := dnstest.Exchange(c, dnstest.Query(id, "x"), 2*time.Second); err != nil {
			t.Fatalf("query %d: %v", id, err)
		}
	}
	f.stop()
	if got := f.Stats(); got.TCP != 4 || got.Failed != 0 {
		t.Errorf("counts %+v, want 4 answered", got)
	}
}
