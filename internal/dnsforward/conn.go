package dnsforward

// This file serves a client's TCP connection: its queries are read one
// after the other and answered as their answers come (RFC 7766 6.2.1.1),
// each over a connection of its own to the upstream, kept for the
// connection's next queries if it is clean.

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// pipelined is how many queries of one connection may be unanswered at
// once; past it the connection's next query is not read until one is
// answered. Each holds an in-flight slot, within its client's share.
const pipelined = 16

// tcpSendBuffer is a client connection's send buffer (SO_SNDBUF; the
// kernel doubles it for its own bookkeeping): room for a large answer,
// not the megabytes the kernel's autotuning gives a connection whose
// client does not read.
const tcpSendBuffer = 64 << 10

const (
	busy      waitState = iota // on the upstream: not closed for another
	waitQuery                  // on the client's next query (or the rest of it)
	waitRead                   // on the client to read an answer: closed first
)

// serveConn reads a connection's queries until it ends, sends a message
// that is not a query, or stays idle (or half-sent) past IdleTimeout; each
// query read goes on in a goroutine of its own. A client that ends its
// side after its queries still gets their answers. An idle connection
// holds no buffer; a query holds one from its frame's first byte to its
// answer's last.
func (f *Forwarder) serveConn(tc *tconn) {
	defer close(tc.done)
	defer f.conns.remove(tc)
	defer tc.shut(false)
	defer tc.queries.Wait()
	for {
		tc.pending <- struct{}{}
		if !f.readQuery(tc) {
			<-tc.pending
			return
		}
	}
}

// readQuery reads the connection's next query and starts it; false when
// the connection must end (its queries may still be answered).
func (f *Forwarder) readQuery(tc *tconn) bool {
	if err := tc.conn.SetReadDeadline(time.Now().Add(f.lim.IdleTimeout)); err != nil {
		return false
	}
	n, err := ReadLength(tc.conn)
	if err == nil && n < HeaderLen {
		err = ErrShort
	}
	if !f.connErr(tc, err) {
		return false
	}
	b := f.getBuf()
	msg, err := ReadMessage(tc.conn, n, *b)
	if err == nil {
		err = CheckQuery(msg)
	}
	if !f.connErr(tc, err) {
		f.putBuf(b)
		return false
	}
	f.conns.change(tc, 1, 0)
	if !f.slots.take(tc.client, f.lim.QueryTimeout, tc.aborted) {
		f.conns.change(tc, -1, 0)
		f.putBuf(b)
		f.st.busy.Add(1)
		tc.abort()
		return false
	}
	tc.queries.Go(func() {
		defer func() { <-tc.pending }()
		defer f.slots.give(tc.client)
		defer f.putBuf(b)
		f.query(tc, msg, *b)
	})
	return true
}

// connErr counts why a connection ends; true when err is nil and it goes
// on. A connection that does not end cleanly (io.EOF between frames: its
// client has sent all it will) is closed at once, its queries with it.
func (f *Forwarder) connErr(tc *tconn, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, io.EOF):
		return false
	case errors.Is(err, ErrShort) || errors.Is(err, ErrNotQuery):
		f.st.garbage.Add(1)
	case isTimeout(err):
		f.st.idle.Add(1)
	}
	// Otherwise the client reset it, or it was closed to make room.
	tc.abort()
	return false
}

// query forwards msg and writes the reply back to the client; buf is
// msg's buffer, which the reply is read into.
func (f *Forwarder) query(tc *tconn, msg, buf []byte) {
	reply, err := f.tcpExchange(tc, msg, buf)
	f.conns.change(tc, -1, 1)
	defer f.conns.change(tc, 0, -1)
	if err != nil {
		f.st.fail(err)
		return
	}
	tc.write.Lock()
	defer tc.write.Unlock()
	if err := tc.conn.SetWriteDeadline(time.Now().Add(f.lim.WriteTimeout)); err != nil {
		return
	}
	if err := writeFrame(tc.conn, reply); err != nil {
		if isTimeout(err) {
			// Its send queue stayed full (abort drops it).
			f.st.unread.Add(1)
		}
		tc.abort()
		return
	}
	f.st.tcp.Add(1)
}

// tcpExchange sends msg to the upstream and reads the reply into buf,
// which may be msg's own (it is sent by then). A query takes a connection
// its client's connection has kept (a connect per query was most of a TCP
// query's cost) if one is clean, else opens one. A kept connection the
// upstream has closed meanwhile fails before a byte of the reply is read,
// and msg is still whole: it is sent once more on a new connection.
func (f *Forwarder) tcpExchange(tc *tconn, msg, buf []byte) ([]byte, error) {
	deadline := time.Now().Add(f.lim.QueryTimeout)
	if up := tc.keptUpstream(); up != nil {
		reply, sent, err := f.exchangeOn(up, deadline, msg, buf)
		tc.doneUpstream(up, err == nil)
		if err == nil || sent {
			return reply, err
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	up, err := f.dial(ctx, "tcp", f.upstream.String())
	if err != nil {
		return nil, err
	}
	if !tc.useUpstream(up) {
		return nil, net.ErrClosed
	}
	reply, _, err := f.exchangeOn(up, deadline, msg, buf)
	tc.doneUpstream(up, err == nil)
	return reply, err
}

// exchangeOn is one query on the upstream connection up; replies that do
// not answer it (Answers) are skipped. sent says that a reply had begun
// to arrive (into buf, over msg) when it failed.
func (f *Forwarder) exchangeOn(up net.Conn, deadline time.Time, msg, buf []byte) (reply []byte, sent bool, err error) {
	if err := up.SetDeadline(deadline); err != nil {
		return nil, false, err
	}
	// What Answers reads of msg, which the reply is read over.
	var qh [queryHead]byte
	query := qh[:copy(qh[:], msg)]
	if err := writeFrame(up, msg); err != nil {
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

// keptUpstream takes a kept upstream connection that is clean (one that
// is not is closed), or returns nil.
func (tc *tconn) keptUpstream() net.Conn {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for up, idle := range tc.ups {
		if !idle {
			continue
		}
		if clean(up) {
			tc.ups[up] = false
			return up
		}
		delete(tc.ups, up)
		up.Close()
	}
	return nil
}

// clean tells whether c, an upstream connection kept from an answered
// query, has nothing queued to read: no late copy of an answer (an
// upstream may answer twice), no error, and no end of stream. One that
// has is closed rather than read: a copy queued there has the ID, and
// maybe the question, of the last query, and the next query through the
// connection may come from another client with the same ID. A copy that
// comes after the check is told apart by its question (Answers). The
// check is one non-blocking peek, a microsecond.
func clean(c net.Conn) bool {
	empty := false
	return onFD(c, func(fd int) {
		var b [1]byte
		var rerr error = unix.EINTR
		for rerr == unix.EINTR {
			_, _, rerr = unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		}
		empty = rerr == unix.EAGAIN
	}) && empty
}

// useUpstream counts a new upstream connection in use; false (and up
// closed) when the client's connection is closed already.
func (tc *tconn) useUpstream(up net.Conn) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.closed {
		up.Close()
		return false
	}
	tc.ups[up] = false
	return true
}

// doneUpstream keeps up for the next query after an answer, or closes it.
func (tc *tconn) doneUpstream(up net.Conn, answered bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if answered && !tc.closed {
		tc.ups[up] = true
		return
	}
	delete(tc.ups, up)
	up.Close()
}

// abort closes the client's connection and its upstream connections, so
// that its queries end at once. Answers its client has not read are
// dropped with a reset: closed normally, the kernel would go on holding
// them for a client that does not read.
func (tc *tconn) abort() { tc.shut(true) }

// shut closes the connection, with a reset if reset is set and answers
// are still queued toward the client.
func (tc *tconn) shut(reset bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.closed {
		return
	}
	close(tc.aborted)
	tc.closed = true
	if reset && unsent(tc.conn) {
		_ = tc.conn.SetLinger(0)
	}
	tc.conn.Close()
	for up := range tc.ups {
		up.Close()
	}
	clear(tc.ups)
}

// unsent tells whether bytes written to c wait in its send queue
// (SIOCOUTQ), unsent or unacknowledged.
func unsent(c *net.TCPConn) bool {
	n := 0
	return onFD(c, func(fd int) { n, _ = unix.IoctlGetInt(fd, unix.SIOCOUTQ) }) && n > 0
}
