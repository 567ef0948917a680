package dnsforward

// This file holds the TCP side's accept loop and the set of connections
// with its cap; conn.go serves a connection.

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// serveTCP accepts connections until the listener is closed.
func (f *Forwarder) serveTCP(wg *sync.WaitGroup) error {
	for {
		c, err := f.tcp.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: the next
			// accept may work once a connection has ended.
			f.st.fail(err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		// A small send queue: a client that does not read its
		// answers holds little of the kernel's memory.
		_ = c.SetWriteBuffer(tcpSendBuffer)
		// Its client's address, IPv4 unmapped (a nil *TCPAddr: none).
		ta, _ := c.RemoteAddr().(*net.TCPAddr)
		tc := &tconn{conn: c, done: make(chan struct{}), client: ta.AddrPort().Addr().Unmap(),
			pending: make(chan struct{}, pipelined), ups: make(map[net.Conn]bool), aborted: make(chan struct{})}
		if !f.conns.add(tc, &f.st) {
			f.st.refused.Add(1)
			c.Close()
			continue
		}
		wg.Go(func() { f.serveConn(tc) })
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// tconn is a client's TCP connection.
type tconn struct {
	conn   *net.TCPConn
	client netip.Addr
	done   chan struct{} // closed when its goroutine has ended

	queries sync.WaitGroup // its queries' goroutines
	pending chan struct{}  // a token per query read and not yet answered
	write   sync.Mutex     // one answer written at a time

	mu      sync.Mutex
	ups     map[net.Conn]bool // to the upstream: true when kept idle
	closed  bool              // by abort: no upstream connection is kept
	aborted chan struct{}     // closed by abort: a query waits for no slot

	// Guarded by connSet.mu.
	atUpstream, writing int // its queries waiting on the upstream, on the client
	closing             bool
	idleSince           time.Time // when wait last changed
}

// waitState is what a connection waits for (conn.go names them).
type waitState int

// wait is what the connection waits for; the connection set closes one
// that waits on its client to make room for a new one.
func (tc *tconn) wait() waitState {
	switch {
	case tc.atUpstream > 0:
		return busy
	case tc.writing > 0:
		return waitRead
	}
	return waitQuery
}

// connSet holds the open connections, at most max of them.
type connSet struct {
	mu     sync.Mutex
	max    int
	conns  map[*tconn]struct{}
	closed bool // by closeAll: Serve is stopping, none is taken in
}

func (s *connSet) init(max int) { s.max, s.conns = max, make(map[*tconn]struct{}, max) }

// add takes c in. At the cap it closes a connection of the client
// address that holds the most (so that one client's connections cannot
// push out another's): of those, the one that has waited on its client
// the longest, one that does not read its answers before one idle (a
// half-open one sending nothing, typically). It waits for that one's
// goroutine to end (at once: its read or write fails), so that never
// more than the cap are open, nor hold a buffer. With none of them
// waiting on its client, they are all in a query, and c is refused. Only
// the accept loop calls it.
func (s *connSet) add(c *tconn, st *stats) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed && len(s.conns) >= s.max {
		// A new connection counts for its address.
		held := map[netip.Addr]int{c.client: 1}
		most := 1
		for o := range s.conns {
			held[o.client]++
			most = max(most, held[o.client])
		}
		var oldest *tconn
		for o := range s.conns {
			w := o.wait()
			if w == busy || o.closing || held[o.client] < most {
				continue
			}
			if oldest == nil || w > oldest.wait() || w == oldest.wait() && o.idleSince.Before(oldest.idleSince) {
				oldest = o
			}
		}
		if oldest == nil {
			return false
		}
		oldest.closing = true
		oldest.abort()
		s.mu.Unlock()
		<-oldest.done
		st.evicted.Add(1)
		s.mu.Lock()
	}
	if s.closed {
		return false
	}
	c.idleSince = time.Now()
	s.conns[c] = struct{}{}
	return true
}

// change counts a query of c going to the upstream (dUp) or to the
// client (dWrite), or coming back.
func (s *connSet) change(c *tconn, dUp, dWrite int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := c.wait()
	c.atUpstream += dUp
	c.writing += dWrite
	if c.wait() != was {
		c.idleSince = time.Now()
	}
}

func (s *connSet) remove(c *tconn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.abort()
	}
}
