package dnsforward

// This file holds the TCP side: the accept loop, the set of connections
// with its cap, and a connection's queries, each forwarded over a TCP
// connection of its own to the upstream.

import (
	"context"
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
		tc := &tconn{conn: c, done: make(chan struct{}), client: clientAddr(c.RemoteAddr())}
		if !f.conns.add(tc, &f.st) {
			f.st.refused.Add(1)
			c.Close()
			continue
		}
		wg.Go(func() { f.serveConn(tc) })
	}
}

// serveConn answers a connection's queries, one after the other, until it
// ends, sends a message that is not a query, or stays idle (or half-sent)
// past IdleTimeout. An idle connection holds no buffer; one inside a frame
// holds one, for the query and then its reply.
func (f *Forwarder) serveConn(tc *tconn) {
	defer close(tc.done)
	defer f.conns.remove(tc)
	defer tc.conn.Close()
	defer tc.closeUpstream()
	for {
		f.conns.setWait(tc, waitQuery)
		if err := tc.conn.SetReadDeadline(time.Now().Add(f.lim.IdleTimeout)); err != nil {
			return
		}
		n, err := ReadLength(tc.conn)
		if err == nil && n < HeaderLen {
			err = ErrShort
		}
		if !f.connErr(err) {
			return
		}
		if !f.query(tc, n) {
			return
		}
	}
}

// connErr counts why a connection ends; true when err is nil and it goes
// on.
func (f *Forwarder) connErr(err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrShort) || errors.Is(err, ErrNotQuery):
		f.st.garbage.Add(1)
	case isTimeout(err):
		f.st.idle.Add(1)
	}
	// Otherwise the client closed it (io.EOF between frames is the
	// usual end), or it was closed to make room.
	return false
}

// query reads the rest of a frame of n bytes, forwards it and writes the
// reply back; false when the connection must end.
func (f *Forwarder) query(tc *tconn, n int) bool {
	b := f.getBuf()
	defer f.putBuf(b)
	msg, err := ReadMessage(tc.conn, n, *b)
	if err == nil {
		err = CheckQuery(msg)
	}
	if !f.connErr(err) {
		return false
	}
	f.conns.setWait(tc, busy)
	select {
	case f.slots <- struct{}{}:
	case <-time.After(f.lim.QueryTimeout):
		f.st.busy.Add(1)
		return false
	}
	reply, err := f.tcpExchange(tc, msg, *b)
	<-f.slots
	if err != nil {
		f.st.fail(err)
		return false
	}
	// Waiting on the client to read: the first closed for a new one.
	f.conns.setWait(tc, waitRead)
	if err := tc.conn.SetWriteDeadline(time.Now().Add(f.lim.WriteTimeout)); err != nil {
		return false
	}
	var prefix [2]byte
	prefix[0], prefix[1] = byte(len(reply)>>8), byte(len(reply))
	bufs := net.Buffers{prefix[:], reply}
	if _, err := bufs.WriteTo(tc.conn); err != nil {
		if isTimeout(err) {
			// Its send queue stayed full: drop it with a reset
			// rather than leave the kernel to hold it.
			f.st.unread.Add(1)
			_ = tc.conn.SetLinger(0)
		}
		return false
	}
	f.st.tcp.Add(1)
	return true
}

// tcpSendBuffer is a client connection's send buffer (SO_SNDBUF; the
// kernel doubles it for its own bookkeeping): room for a large answer,
// not the megabytes the kernel's autotuning gives a connection whose
// client does not read.
const tcpSendBuffer = 64 << 10

// tcpExchange sends msg to the upstream and reads the reply into buf,
// which may be msg's own (it is sent by then). The client's connection
// keeps its upstream connection for its next query (tc.up): a connect per
// query was most of a TCP query's cost. A kept connection the upstream
// has closed meanwhile fails before a byte of the reply is read, and
// msg is still whole: it is sent once more on a new connection.
func (f *Forwarder) tcpExchange(tc *tconn, msg, buf []byte) ([]byte, error) {
	deadline := time.Now().Add(f.lim.QueryTimeout)
	if tc.up != nil && !clean(tc.up) {
		// A late copy of an answer, or the upstream's end.
		tc.closeUpstream()
	}
	if tc.up != nil {
		reply, sent, err := f.exchangeOn(tc.up, deadline, msg, buf)
		if err == nil || sent {
			if err != nil {
				tc.closeUpstream()
			}
			return reply, err
		}
		tc.closeUpstream()
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	up, err := f.dial(ctx, "tcp", f.upstream.String())
	if err != nil {
		return nil, err
	}
	tc.up = up
	reply, _, err := f.exchangeOn(up, deadline, msg, buf)
	if err != nil {
		tc.closeUpstream()
	}
	return reply, err
}

// exchangeOn is one query on the upstream connection up; replies that do
// not answer it (Answers) are skipped. sent says that a reply had begun
// to arrive (into buf, over msg) when it failed.
func (f *Forwarder) exchangeOn(up net.Conn, deadline time.Time, msg, buf []byte) (reply []byte, sent bool, err error) {
	if err := up.SetDeadline(deadline); err != nil {
		return nil, false, err
	}
	var qh [queryHead]byte
	query := head(&qh, msg)
	var prefix [2]byte
	prefix[0], prefix[1] = byte(len(msg)>>8), byte(len(msg))
	bufs := net.Buffers{prefix[:], msg}
	if _, err := bufs.WriteTo(up); err != nil {
		return nil, false, err
	}
	for first := true; ; first = false {
		n, err := ReadLength(up)
		if err != nil {
			return nil, !first, err
		}
		if reply, err = ReadMessage(up, n, buf); err != nil {
			return nil, true, err
		}
		if Answers(reply, query) {
			return reply, true, nil
		}
		// A late copy of an earlier answer that came after the
		// check (clean): the answer is behind it, or the deadline
		// ends the wait.
		f.st.garbage.Add(1)
	}
}

// clientAddr is a connection's client address, IPv4 unmapped.
func clientAddr(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// tconn is a client's TCP connection.
type tconn struct {
	conn      *net.TCPConn
	client    netip.Addr
	up        net.Conn      // to the upstream, kept between queries (its goroutine's alone)
	done      chan struct{} // closed when its goroutine has ended
	wait      waitState
	closing   bool
	idleSince time.Time // when wait last changed from busy
}

// waitState is what a connection waits for; the connection set closes
// one that waits on its client to make room for a new one.
type waitState int

const (
	busy      waitState = iota // the upstream: not closed for another
	waitQuery                  // the client's next query (or the rest of it)
	waitRead                   // the client to read an answer: closed first
)

func (tc *tconn) closeUpstream() {
	if tc.up != nil {
		tc.up.Close()
		tc.up = nil
	}
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
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if len(s.conns) >= s.max {
		// A new connection counts for its address.
		held := map[netip.Addr]int{c.client: 1}
		most := 1
		for o := range s.conns {
			held[o.client]++
			most = max(most, held[o.client])
		}
		var oldest *tconn
		for o := range s.conns {
			if o.wait == busy || o.closing || held[o.client] < most {
				continue
			}
			if oldest == nil || o.wait > oldest.wait || o.wait == oldest.wait && o.idleSince.Before(oldest.idleSince) {
				oldest = o
			}
		}
		if oldest == nil {
			s.mu.Unlock()
			return false
		}
		oldest.closing = true
		oldest.conn.Close()
		s.mu.Unlock()
		<-oldest.done
		st.evicted.Add(1)
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	c.wait, c.idleSince = waitQuery, time.Now()
	s.conns[c] = struct{}{}
	return true
}

func (s *connSet) setWait(c *tconn, w waitState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w != c.wait {
		c.idleSince = time.Now()
	}
	c.wait = w
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
		c.conn.Close()
	}
}
