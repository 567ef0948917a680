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
		select {
		case f.slots <- struct{}{}:
		default:
			// Full: the client's resolver asks again, or another
			// upstream. Waiting here would hold back every datagram
			// behind this one.
			f.st.busy.Add(1)
			continue
		}
		q := b
		b = f.getBuf()
		wg.Go(func() {
			defer func() { <-f.slots }()
			defer f.putBuf(q)
			f.udpQuery(client, *q, n)
		})
	}
}

// udpQuery forwards the query in buf[:n] from client and sends back the
// upstream's reply. A connected socket of its own per query takes only
// the upstream's datagrams, on a fresh source port, as the node's own
// resolver does.
func (f *Forwarder) udpQuery(client netip.AddrPort, buf []byte, n int) {
	id := ID(buf[:n])
	deadline := time.Now().Add(f.lim.QueryTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	up, err := f.dial(ctx, "udp", f.upstream.String())
	if err != nil {
		f.st.fail(err)
		return
	}
	defer up.Close()
	if err := up.SetDeadline(deadline); err != nil {
		f.st.fail(err)
		return
	}
	if _, err := up.Write(buf[:n]); err != nil {
		f.st.fail(err)
		return
	}
	for {
		m, err := up.Read(buf)
		if err != nil {
			f.st.fail(err)
			return
		}
		if IsReplyTo(buf[:m], id) {
			n = m
			break
		}
		// Not the answer (a late reply to nothing we sent): wait on.
		f.st.garbage.Add(1)
	}
	if _, err := f.udp.WriteToUDPAddrPort(buf[:n], client); err != nil {
		f.st.fail(err)
		return
	}
	f.st.udp.Add(1)
}
