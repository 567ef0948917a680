package dnstest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
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

	udp   *net.UDPConn
	tcp   *net.TCPListener
	delay time.Duration
	// oneQuery: a TCP connection is closed after its first answer, as a
	// server that does not keep connections open does.
	oneQuery bool
	wg       sync.WaitGroup
}

// Start binds UDP and TCP on addr (port 0: one free for both) in the
// calling thread's network namespace and answers until the test ends,
// each answer after delay.
func Start(t testing.TB, addr netip.AddrPort, delay time.Duration) *Server {
	t.Helper()
	return start(t, addr, &Server{delay: delay})
}

// StartOneQuery is Start of a server that closes each TCP connection
// after its first answer.
func StartOneQuery(t testing.TB, addr netip.AddrPort) *Server {
	t.Helper()
	return start(t, addr, &Server{oneQuery: true})
}

func start(t testing.TB, addr netip.AddrPort, s *Server) *Server {
	t.Helper()
	for range 8 {
		u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		if err != nil {
			t.Fatalf("stand-in resolver: %v", err)
		}
		bound := u.LocalAddr().(*net.UDPAddr).AddrPort()
		bound = netip.AddrPortFrom(addr.Addr(), bound.Port())
		l, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(bound))
		if err != nil {
			u.Close()
			if addr.Port() == 0 {
				continue
			}
			t.Fatalf("stand-in resolver: %v", err)
		}
		s.udp, s.tcp, s.Addr = u, l, bound
		break
	}
	if s.udp == nil {
		t.Fatal("stand-in resolver: no port free for both UDP and TCP")
	}
	s.wg.Go(s.serveUDP)
	s.wg.Go(s.serveTCP)
	t.Cleanup(func() {
		s.udp.Close()
		s.tcp.Close()
		s.wg.Wait()
	})
	return s
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
		if dnsforward.CheckQuery(buf[:n]) != nil {
			continue
		}
		reply := Answer(buf[:n])
		if s.delay > 0 {
			s.wg.Go(func() {
				time.Sleep(s.delay)
				s.Queries.Add(1)
				s.udp.WriteToUDPAddrPort(reply, from)
			})
			continue
		}
		// Counted first: a test reads the count once it has the answer.
		s.Queries.Add(1)
		s.udp.WriteToUDPAddrPort(reply, from)
	}
}

func (s *Server) serveTCP() {
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			return
		}
		s.wg.Go(func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			for {
				q, err := dnsforward.ReadFrame(c, nil)
				if err != nil {
					return
				}
				time.Sleep(s.delay)
				out, _ := dnsforward.AppendFrame(nil, Answer(q))
				s.Queries.Add(1)
				if _, err := c.Write(out); err != nil || s.oneQuery {
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
	if stream {
		var err error
		if reply, err = dnsforward.ReadFrame(c, nil); err != nil {
			return nil, err
		}
	} else {
		buf := make([]byte, dnsforward.MaxMessage)
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		reply = buf[:n]
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
