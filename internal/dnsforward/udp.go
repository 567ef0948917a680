package dnsforward

// This file holds the UDP side: one reader, and a goroutine per query in
// flight, each with a socket of its own to the upstream.

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// serveUDP reads datagrams until the socket is closed. The buffer a query
// was read into goes with it to its goroutine, which reads the reply into
// it too: a query in flight holds one MaxMessage buffer, the reader
// another.
func (f *Forwarder) serveUDP(wg *sync.WaitGroup) error {
	b := f.getBuf()
	defer func() { f.putBuf(b) }()
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
		from := client.Addr().Unmap()
		if !f.slots.tryTake(from) {
			// Full, or the client's share is: its resolver asks
			// again, or another upstream. Waiting here would hold
			// back every datagram behind this one.
			f.st.busy.Add(1)
			continue
		}
		q := b
		b = f.getBuf()
		wg.Go(func() {
			defer f.slots.give(from)
			defer f.putBuf(q)
			f.udpQuery(client, *q, n)
		})
	}
}

// udpQuery forwards the query in buf[:n] from client and sends back the
// upstream's reply. Each query has a connected socket of its own to the
// upstream while it is in flight (so it takes only the upstream's
// datagrams); one that got its answer goes back to a pool of at most
// InFlight for the next query, which spares a socket, a connect and a
// close per query. A reply must answer the query (Answers: ID and
// question); a socket is reused only with nothing queued (clean). The
// upstream is the node's own DNAT to Docker's DNS: no one outside the
// node sees those ports.
func (f *Forwarder) udpQuery(client netip.AddrPort, buf []byte, n int) {
	deadline := time.Now().Add(f.lim.QueryTimeout)
	up, err := f.upstreamUDP(deadline)
	if err != nil {
		f.st.fail(err)
		return
	}
	if err := up.SetDeadline(deadline); err != nil {
		up.Close()
		f.st.fail(err)
		return
	}
	if _, err := up.Write(buf[:n]); err != nil {
		up.Close()
		f.st.fail(err)
		return
	}
	var qh [queryHead]byte
	query := head(&qh, buf[:n])
	for {
		m, err := up.Read(buf)
		if err != nil {
			// A late reply may still come to this socket: it is
			// not reused.
			up.Close()
			f.st.fail(err)
			return
		}
		if Answers(buf[:m], query) {
			n = m
			break
		}
		// Not the answer (a late reply to an earlier query): wait on.
		f.st.garbage.Add(1)
	}
	f.putUpstreamUDP(up)
	if _, err := f.udp.WriteToUDPAddrPort(buf[:n], client); err != nil {
		f.st.fail(err)
		return
	}
	f.st.udp.Add(1)
}

// upstreamUDP is a socket to the upstream: an idle one with nothing
// queued (clean), or a new one.
func (f *Forwarder) upstreamUDP(deadline time.Time) (net.Conn, error) {
	for {
		select {
		case c := <-f.idleUDP:
			if clean(c) {
				return c, nil
			}
			c.Close()
			f.st.garbage.Add(1)
			continue
		default:
		}
		break
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	return f.dial(ctx, "udp", f.upstream.String())
}

// putUpstreamUDP keeps an answered query's socket for the next, or closes
// it when InFlight are kept already.
func (f *Forwarder) putUpstreamUDP(c net.Conn) {
	select {
	case f.idleUDP <- c:
	default:
		c.Close()
	}
}

// closeIdleUDP closes the kept sockets, once Serve has stopped.
func (f *Forwarder) closeIdleUDP() {
	for {
		select {
		case c := <-f.idleUDP:
			c.Close()
		default:
			return
		}
	}
}
