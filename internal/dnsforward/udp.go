package dnsforward

// This file holds the UDP side: one reader of the clients' datagrams that
// sends each query on at once, over one socket to the upstream shared by
// every UDP query in flight, and one reader of that socket that sends
// each answer back to its client. A query costs four system calls and no
// goroutine of its own.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// serveUDP reads the clients' datagrams until the socket is closed, and
// sends each query on (udpUp.send).
func (f *Forwarder) serveUDP() error {
	b := f.getBuf()
	defer f.putBuf(b)
	for {
		n, client, err := f.udp.ReadFromUDPAddrPort(*b)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Not the socket's end (an ICMP error queued on it):
			// the next read goes on.
			f.st.fail(err)
			continue
		}
		if CheckQuery((*b)[:n]) != nil {
			f.st.garbage.Add(1)
			continue
		}
		if !f.slots.tryTake(client.Addr().Unmap()) {
			// Full, or the client's share is: its resolver asks
			// again, or another upstream. Waiting here would hold
			// back every datagram behind this one.
			f.st.busy.Add(1)
			continue
		}
		if err := f.up.send(client, (*b)[:n]); err != nil {
			f.st.fail(err)
		}
	}
}

// udpQuery is a UDP query in flight: who asked, with which ID, and what
// Answers reads of it as sent upstream (under the upstream ID).
type udpQuery struct {
	client netip.AddrPort
	id     uint16 // the client's
	head   [queryHead]byte
	n      int
	timer  func() bool // stops its timeout; false when it has fired
}

// udpUp is the socket to the upstream that every UDP query in flight
// shares. Each query goes up under an ID of the forwarder's (ids), so
// that clients that chose the same ID are told apart; an answer goes to
// the query pending under its ID only if it Answers it (ID and question),
// with the client's ID put back. An answer for no pending query (a late
// or duplicate copy, or a forged one) is dropped: a query ends when its
// first answer comes or at QueryTimeout, and its ID is not used again
// for the next 65,535 queries, so a late copy cannot reach a later
// client. The upstream is the node's own DNAT to Docker's DNS: no one
// outside the node sees this socket.
type udpUp struct {
	f       *Forwarder
	mu      sync.Mutex
	conn    net.Conn // nil until the first query, and after a failed send
	pending map[uint16]*udpQuery
	ids     idSequence
	readErr error          // the socket's last error since its last answer
	queries sync.WaitGroup // the pending queries, for Serve's end
	readers sync.WaitGroup // the readers of conn and of its predecessors
}

func (u *udpUp) init(f *Forwarder) {
	u.f, u.pending = f, make(map[uint16]*udpQuery, f.lim.InFlight)
	u.ids.init()
}

// send forwards the query in msg (which it rewrites to the upstream ID)
// from client, which holds a slot; the slot is given back when the query
// ends, or at once when send fails (its error: the caller counts it).
func (u *udpUp) send(client netip.AddrPort, msg []byte) error {
	f := u.f
	q := &udpQuery{client: client, id: ID(msg)}
	u.mu.Lock()
	conn, err := u.connLocked()
	if err != nil {
		u.mu.Unlock()
		f.slots.give(client.Addr().Unmap())
		return err
	}
	id := u.ids.next(u.pending)
	msg[0], msg[1] = byte(id>>8), byte(id)
	q.n = copy(q.head[:], msg)
	u.pending[id] = q
	u.queries.Add(1)
	q.timer = time.AfterFunc(f.lim.QueryTimeout, func() { u.end(id, q, u.timedOut()) }).Stop
	u.mu.Unlock()
	if _, err := conn.Write(msg); err != nil {
		// A socket that cannot send is replaced for the next
		// query; this one's reader ends with it.
		u.mu.Lock()
		if u.conn == conn {
			u.conn = nil
			conn.Close()
		}
		u.mu.Unlock()
		if q.timer() && u.end(id, q, nil) {
			return err
		}
		// Its timeout came first, and counted it.
	}
	return nil
}

// timedOut is the failure of a query that had no answer in time: the
// socket's own error if it had one (an ICMP error, such as the upstream's
// port refused) since its last answer.
func (u *udpUp) timedOut() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.readErr != nil {
		return fmt.Errorf("no answer from the upstream in time; %w", u.readErr)
	}
	return errors.New("no answer from the upstream in time")
}

// end ends query q pending under id, if it still is, counting err as its
// failure (nil: counted by the caller); false when it had ended already.
func (u *udpUp) end(id uint16, q *udpQuery, err error) bool {
	u.mu.Lock()
	if u.pending[id] != q {
		u.mu.Unlock()
		return false
	}
	delete(u.pending, id)
	u.mu.Unlock()
	u.f.slots.give(q.client.Addr().Unmap())
	if err != nil {
		u.f.st.fail(err)
	}
	u.queries.Done()
	return true
}

// connLocked is the shared socket, dialled now if there is none, with its
// reader started.
func (u *udpUp) connLocked() (net.Conn, error) {
	if u.conn != nil {
		return u.conn, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), u.f.lim.QueryTimeout)
	defer cancel()
	conn, err := u.f.dial(ctx, "udp", u.f.upstream.String())
	if err != nil {
		return nil, err
	}
	if uc, ok := conn.(*net.UDPConn); ok {
		receiveBuffer(uc)
	}
	u.conn = conn
	u.readers.Go(func() { u.read(conn) })
	return conn, nil
}

// read reads the upstream's answers from conn until it is closed, and
// sends each to the client whose query it answers.
func (u *udpUp) read(conn net.Conn) {
	f := u.f
	b := f.getBuf()
	defer f.putBuf(b)
	for {
		n, err := conn.Read(*b)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// An ICMP error (the upstream's port unreachable): the
			// queries it concerns end at their timeout, with it.
			u.mu.Lock()
			u.readErr = err
			u.mu.Unlock()
			continue
		}
		reply := (*b)[:n]
		if n < HeaderLen {
			f.st.garbage.Add(1)
			continue
		}
		id := ID(reply)
		u.mu.Lock()
		q := u.pending[id]
		if q != nil {
			u.readErr = nil
		}
		u.mu.Unlock()
		if q == nil || !Answers(reply, q.head[:q.n]) || !q.timer() || !u.end(id, q, nil) {
			// A late or duplicate copy, a forged reply, or one
			// that came as its query timed out.
			f.st.garbage.Add(1)
			continue
		}
		reply[0], reply[1] = byte(q.id>>8), byte(q.id)
		if _, err := f.udp.WriteToUDPAddrPort(reply, q.client); err != nil {
			f.st.fail(err)
			continue
		}
		f.st.udp.Add(1)
	}
}

// close waits for the pending queries to end (each within QueryTimeout),
// then closes the socket and waits for its readers: at Serve's end.
func (u *udpUp) close() {
	u.queries.Wait()
	u.mu.Lock()
	if u.conn != nil {
		u.conn.Close()
		u.conn = nil
	}
	u.mu.Unlock()
	u.readers.Wait()
}
