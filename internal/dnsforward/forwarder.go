package dnsforward

// This file holds the forwarder's configuration, its sockets and its run;
// udp.go and tcp.go are the two transports, stats.go what it logs.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// Limits bound what the forwarder holds at once and how long it waits.
type Limits struct {
	// InFlight is how many queries (UDP and TCP together) may wait for
	// the upstream at once, a client address at most its share (slots).
	// A UDP query past it is dropped (its client retries), a TCP
	// connection waits for a slot.
	InFlight int
	// Conns is how many TCP connections are open at once; at the cap,
	// one that waits on its client is closed to make room (connSet.add).
	Conns int
	// QueryTimeout is how long a query waits for the upstream's answer:
	// CoreDNS's forward plugin gives up on an upstream after 2 s, glibc
	// after 5 s, so 3 s frees the slot once no client waits any more.
	QueryTimeout time.Duration
	// IdleTimeout is how long a TCP connection may take to send a query
	// (whole: a half-sent frame counts) before it is closed; RFC 7766
	// 6.2.3 suggests seconds, not minutes.
	IdleTimeout time.Duration
	// WriteTimeout is how long a TCP client may take to read an answer:
	// to make room for it in the connection's send queue, which holds
	// at most about 2 × tcpSendBuffer. A client that does not is
	// closed, its queue dropped with a reset.
	WriteTimeout time.Duration
}

// DefaultLimits are the limits of the node's forwarder: CoreDNS sends at
// most max_concurrent 1000 queries per upstream, but it answers most from
// its cache, and Docker's embedded DNS is one process; 128 in flight is
// several thousand queries a second at its usual millisecond latency.
func DefaultLimits() Limits {
	return Limits{InFlight: 128, Conns: 64, QueryTimeout: 3 * time.Second, IdleTimeout: 10 * time.Second, WriteTimeout: 2 * time.Second}
}

// MemoryBound is what the forwarder's buffers can hold at most: a
// MaxMessage buffer for each of the two UDP readers (the clients' socket
// and the upstream's), one per TCP query in flight (for the query, then
// its reply, until it is sent), and one per TCP connection reading a
// query's frame or waiting for its slot (idle ones hold none). A UDP
// query in flight holds only its header and question (udpQuery).
// Goroutine stacks (one per TCP query in flight and per connection) add
// a few KiB each.
func (l Limits) MemoryBound() int {
	return (2 + l.InFlight + l.Conns) * MaxMessage
}

func (l Limits) check() error {
	if l.InFlight < 1 || l.Conns < 1 || l.QueryTimeout <= 0 || l.IdleTimeout <= 0 || l.WriteTimeout <= 0 {
		return fmt.Errorf("limits %+v: each must be positive", l)
	}
	if l.InFlight > maxInFlight {
		return fmt.Errorf("limits %+v: at most %d queries in flight (DNS IDs are 16 bits)", l, maxInFlight)
	}
	return nil
}

// Config is what a forwarder is given.
type Config struct {
	// Listen is the address to answer on (port 0: any free port, for
	// tests); Upstream the server to ask.
	Listen, Upstream netip.AddrPort
	Limits           Limits
	Log              *logline.Logger
	// Dial opens a connection to the upstream; nil is net.Dialer's. A
	// test that runs the forwarder in a network namespace of its own
	// opens them there.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// Forwarder answers DNS on one address by asking another.
type Forwarder struct {
	udp      *net.UDPConn
	tcp      *net.TCPListener
	addr     netip.AddrPort
	upstream netip.AddrPort
	lim      Limits
	log      *logline.Logger
	dial     func(ctx context.Context, network, address string) (net.Conn, error)

	slots slots     // the queries in flight, by client address
	up    udpUp     // the UDP queries' socket to the upstream
	bufs  sync.Pool // *[]byte of MaxMessage bytes
	conns connSet
	st    stats
}

// Listen binds UDP and TCP on listen (port 0: one port free for both) and
// returns a forwarder to upstream that Serve runs. The sockets bind with
// IP_FREEBIND: at boot the node's address may still be tentative
// (duplicate address detection), and the forwarder must not fail for it.
func Listen(ctx context.Context, cfg Config) (*Forwarder, error) {
	lim, upstream := cfg.Limits, cfg.Upstream
	if err := lim.check(); err != nil {
		return nil, err
	}
	if !upstream.IsValid() || upstream.Port() == 0 {
		return nil, fmt.Errorf("upstream %s: not an address and port", upstream)
	}
	f := &Forwarder{upstream: upstream, lim: lim, log: cfg.Log, dial: cfg.Dial}
	f.slots.init(lim.InFlight)
	f.up.init(f)
	if f.dial == nil {
		var d net.Dialer
		f.dial = d.DialContext
	}
	f.bufs.New = func() any { b := make([]byte, MaxMessage); return &b }
	var err error
	if f.udp, f.tcp, err = ListenPair(ctx, net.ListenConfig{Control: freebind}, cfg.Listen); err != nil {
		return nil, err
	}
	receiveBuffer(f.udp)
	f.addr = netip.AddrPortFrom(cfg.Listen.Addr(), f.udp.LocalAddr().(*net.UDPAddr).AddrPort().Port())
	f.conns.init(lim.Conns)
	return f, nil
}

// ListenPair binds UDP and TCP with lc on one port of addr's address:
// addr's port, or with port 0 one the kernel picks for UDP and that is
// free for TCP too (it may be taken: another is tried, up to 8).
func ListenPair(ctx context.Context, lc net.ListenConfig, addr netip.AddrPort) (*net.UDPConn, *net.TCPListener, error) {
	network := "udp6"
	if addr.Addr().Is4() {
		network = "udp4"
	}
	var err error
	for range 8 {
		var pc net.PacketConn
		if pc, err = lc.ListenPacket(ctx, network, addr.String()); err != nil {
			err = fmt.Errorf("listen on %s/udp: %w", addr, err)
		} else {
			u := pc.(*net.UDPConn)
			bound := netip.AddrPortFrom(addr.Addr(), u.LocalAddr().(*net.UDPAddr).AddrPort().Port())
			l, lerr := lc.Listen(ctx, "tcp"+network[3:], bound.String())
			if lerr == nil {
				return u, l.(*net.TCPListener), nil
			}
			u.Close()
			err = fmt.Errorf("listen on %s/tcp: %w", bound, lerr)
		}
		if addr.Port() != 0 {
			break
		}
	}
	return nil, nil, err
}

// udpReceiveBuffer is the UDP socket's receive buffer: room for bursts,
// so that a flood of garbage does not make the kernel drop the queries
// queued behind it before the reader gets to them. 4 MiB holds several
// thousand small datagrams (each costs its buffer's truesize, about 1 KiB).
const udpReceiveBuffer = 4 << 20

// receiveBuffer sets udpReceiveBuffer, past net.core.rmem_max where the
// process may (SO_RCVBUFFORCE, CAP_NET_ADMIN: the node's root), else up
// to rmem_max.
func receiveBuffer(u *net.UDPConn) {
	var serr error
	if !onFD(u, func(fd int) { serr = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, udpReceiveBuffer) }) || serr != nil {
		_ = u.SetReadBuffer(udpReceiveBuffer)
	}
}

// onFD runs fn on c's socket descriptor; false when c has none.
func onFD(c net.Conn, fn func(fd int)) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	return err == nil && raw.Control(func(fd uintptr) { fn(int(fd)) }) == nil
}

// freebind lets a socket bind an address the node does not (yet) have.
func freebind(network, _ string, c syscall.RawConn) error {
	level, opt := unix.IPPROTO_IPV6, unix.IPV6_FREEBIND
	if network == "udp4" || network == "tcp4" {
		level, opt = unix.IPPROTO_IP, unix.IP_FREEBIND
	}
	var serr error
	if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, 1) }); err != nil {
		return err
	}
	return serr
}

// Addr is the address the forwarder answers on.
func (f *Forwarder) Addr() netip.AddrPort { return f.addr }

// Serve answers queries until ctx ends, then closes the sockets and waits
// for the queries in flight (each ends within QueryTimeout). It logs a
// summary every interval in which something happened, and at the end.
func (f *Forwarder) Serve(ctx context.Context, interval time.Duration) error {
	f.log.Info(fmt.Sprintf("dns-forwarder: answering DNS on %s (UDP and TCP), forwarding to %s; at most %d queries in flight, %d TCP connections",
		f.addr, f.upstream, f.lim.InFlight, f.lim.Conns))
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- f.serveUDP() })
	wg.Go(func() { errs <- f.serveTCP(&wg) })
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-errs:
			// A socket failed for good: stop, and let systemd restart
			// the unit.
			break loop
		case <-ticker.C:
			f.st.report(f.log, interval)
		}
	}
	f.udp.Close()
	f.tcp.Close()
	f.conns.closeAll()
	wg.Wait()
	f.up.close()
	f.st.report(f.log, 0)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Stats returns the counts so far.
func (f *Forwarder) Stats() Counts { return f.st.load() }

// getBuf and putBuf take and give back a MaxMessage buffer, counting
// those out (Counts.Buffers, PeakBuffers: the memory bound, observed).
func (f *Forwarder) getBuf() *[]byte {
	f.st.bufferOut()
	return f.bufs.Get().(*[]byte)
}

func (f *Forwarder) putBuf(b *[]byte) {
	f.st.buffers.Add(-1)
	f.bufs.Put(b)
}
