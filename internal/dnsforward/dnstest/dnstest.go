package dnstest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
)

// Server is a stand-in resolver on UDP and TCP.
type Server struct {
	Addr netip.AddrPort
	// Queries counts the queries answered.
	Queries atomic.Int64

	udp *net.UDPConn
	tcp *net.TCPListener
	b   Behaviour
	wg  sync.WaitGroup
}

// Behaviour is how a stand-in answers.
type Behaviour struct {
	// Delay is how long each answer waits.
	Delay time.Duration
	// OneQuery: a TCP connection is closed after its first answer, as a
	// server that does not keep connections open does.
	OneQuery bool
	// Twice: every query is answered twice, the second time Dup later
	// with a copy that Duplicate marks (RCODE REFUSED), so that a test
	// sees which of the two a client got.
	Twice bool
	Dup   time.Duration
	// Silent: queries for names whose first label starts with it are
	// never answered.
	Silent string
}

// Start binds UDP and TCP on addr (port 0: one free for both) in the
// calling thread's network namespace and answers until the test ends,
// each answer after delay.
func Start(t testing.TB, addr netip.AddrPort, delay time.Duration) *Server {
	t.Helper()
	return StartWith(t, addr, Behaviour{Delay: delay})
}

// StartWith is Start of a server that answers as b says.
func StartWith(t testing.TB, addr netip.AddrPort, b Behaviour) *Server {
	t.Helper()
	s, err := Listen(addr, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Listen is StartWith outside a test (a benchmark's stand-in running as
// a process of its own): the server answers until Close.
func Listen(addr netip.AddrPort, b Behaviour) (*Server, error) {
	u, l, err := dnsforward.ListenPair(context.Background(), net.ListenConfig{}, addr)
	if err != nil {
		return nil, fmt.Errorf("stand-in resolver: %w", err)
	}
	s := &Server{b: b, udp: u, tcp: l, Addr: netip.AddrPortFrom(addr.Addr(), u.LocalAddr().(*net.UDPAddr).AddrPort().Port())}
	s.wg.Go(s.serveUDP)
	s.wg.Go(s.serveTCP)
	return s, nil
}

// Close stops the server and waits for its goroutines.
func (s *Server) Close() {
	s.udp.Close()
	s.tcp.Close()
	s.wg.Wait()
}

func (s *Server) serveUDP() {
	buf := make([]byte, dnsforward.MaxMessage)
	for {
		n, from, err := s.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if dnsforward.CheckQuery(buf[:n]) != nil || s.silent(buf[:n]) {
			continue
		}
		reply := Answer(buf[:n])
		send := func(m []byte) { s.udp.WriteToUDPAddrPort(m, from) }
		if s.b.Delay > 0 || s.b.Dup > 0 {
			s.wg.Go(func() { s.answer(reply, send, now) })
			continue
		}
		s.answer(reply, send, now)
	}
}

// answer sends reply after Delay and, if the server answers twice, its
// marked copy Dup later, through later (a goroutine of its own, or now).
func (s *Server) answer(reply []byte, send func([]byte), later func(func())) {
	time.Sleep(s.b.Delay)
	// Counted first: a test reads the count once it has the answer.
	s.Queries.Add(1)
	send(reply)
	if s.b.Twice {
		later(func() { time.Sleep(s.b.Dup); send(Duplicate(reply)) })
	}
}

func now(f func()) { f() }

// silent tells whether q is for a name the server does not answer.
func (s *Server) silent(q []byte) bool {
	if s.b.Silent == "" || len(q) <= dnsforward.HeaderLen {
		return false
	}
	n := int(q[dnsforward.HeaderLen])
	label := q[dnsforward.HeaderLen+1:]
	return n <= len(label) && strings.HasPrefix(string(label[:n]), s.b.Silent)
}

func (s *Server) serveTCP() {
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			return
		}
		s.wg.Go(func() {
			var conn sync.WaitGroup
			defer conn.Wait()
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			var mu sync.Mutex // a late duplicate and the next answer
			send := func(m []byte) {
				out, _ := dnsforward.AppendFrame(nil, m)
				mu.Lock()
				defer mu.Unlock()
				c.Write(out)
			}
			for {
				q, err := dnsforward.ReadFrame(c, nil)
				if err != nil {
					return
				}
				if s.silent(q) {
					continue
				}
				later := now
				if s.b.Dup > 0 {
					later = conn.Go
				}
				s.answer(Answer(q), send, later)
				if s.b.OneQuery {
					return
				}
			}
		})
	}
}

// Answer is the stand-in's reply to q: q with the QR and RA bits set.
func Answer(q []byte) []byte {
	r := append([]byte(nil), q...)
	r[2] |= 0x80
	r[3] |= 0x80
	return r
}

// Duplicate is the marked copy of reply that a server answering Twice
// sends second: RCODE REFUSED.
func Duplicate(reply []byte) []byte {
	d := append([]byte(nil), reply...)
	d[3] = d[3]&0xf0 | 5
	return d
}

// Query is dnsforward.NewQuery of a name that is one.
func Query(id uint16, name string) []byte {
	q, err := dnsforward.NewQuery(id, name)
	if err != nil {
		panic(err)
	}
	return q
}

// Exchange sends q over c (a UDP or TCP connection) and returns the
// reply, which must answer it.
func Exchange(c net.Conn, q []byte, timeout time.Duration) ([]byte, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	_, stream := c.(*net.TCPConn)
	msg := q
	if stream {
		msg, _ = dnsforward.AppendFrame(nil, q)
	}
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	var reply []byte
	var err error
	if stream {
		reply, err = dnsforward.ReadFrame(c, nil)
	} else {
		reply = make([]byte, dnsforward.MaxMessage)
		var n int
		n, err = c.Read(reply)
		reply = reply[:n]
	}
	if err != nil {
		return nil, err
	}
	if !dnsforward.IsReplyTo(reply, dnsforward.ID(q)) || len(reply) != len(q) {
		return nil, fmt.Errorf("reply %x does not answer query %x", reply, q)
	}
	return reply, nil
}

// ReadAll drains c until it ends, for tests that expect the forwarder to
// close a connection: nil when it was closed in time (a reset too: a
// socket closed with unread bytes resets the connection).
func ReadAll(c net.Conn, timeout time.Duration) error {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	return err
}
