package dnsforward_test

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
	"github.com/kind-entrypoint/entrypoint/internal/dnsforward/dnstest"
)

// TestFairShare: one client address floods the forwarder with queries
// for names the upstream never answers, over UDP (some 2000 a second)
// and on TCP connections that pipeline them; another address's queries,
// over UDP and TCP, are all answered meanwhile.
func TestFairShare(t *testing.T) {
	up := dnstest.StartWith(t, loop4, dnstest.Behaviour{Silent: "never"})
	lim := dnsforward.DefaultLimits()
	lim.InFlight, lim.QueryTimeout = 16, time.Second
	f := startOn(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0), up.Addr, lim)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	flood := dialFrom(t, "udp", loopB, f.Addr())
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			flood.Write(dnstest.Query(uint16(i), fmt.Sprintf("never-%d", i)))
			if i%20 == 19 {
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
	for range 4 {
		c := dialFrom(t, "tcp", loopB, f.Addr())
		wg.Go(func() {
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			for i := range 64 {
				frame, _ := dnsforward.AppendFrame(nil, dnstest.Query(uint16(i), fmt.Sprintf("never-tcp-%d", i)))
				if _, err := c.Write(frame); err != nil {
					return
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // the flood holds what it can
	u := dialFrom(t, "udp", loopA, f.Addr())
	c := dialFrom(t, "tcp", loopA, f.Addr())
	for i := range 30 {
		for _, conn := range []net.Conn{u, c} {
			q := dnstest.Query(uint16(i), fmt.Sprintf("victim-%d", i))
			if _, err := dnstest.Exchange(conn, q, time.Second); err != nil {
				t.Fatalf("query %d from the other client (%s): %v; counts %+v", i, conn.LocalAddr().Network(), err, f.Stats())
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	f.stop()
	if got := f.Stats(); got.Busy == 0 || got.UDP != 30 || got.TCP != 30 {
		t.Errorf("counts %+v: want the flood dropped over its share, the other client's 60 queries answered", got)
	}
}

// TestPipelined: queries pipelined on one TCP connection are answered as
// their answers come: the first, which the upstream never answers, holds
// back none of the five behind it; and 40 pipelined at once, more than
// a connection may have unanswered, are all answered.
func TestPipelined(t *testing.T) {
	up := dnstest.StartWith(t, loop4, dnstest.Behaviour{Silent: "never"})
	lim := dnsforward.DefaultLimits()
	lim.QueryTimeout = 2 * time.Second
	f := start(t, up.Addr, lim)
	c := dial(t, "tcp", f.Addr())
	id := uint16(0)
	send := func(names ...string) map[string][]byte {
		want := map[string][]byte{}
		var out []byte
		for _, name := range names {
			id++ // unique among those in flight, as RFC 7766 6.2.1.1 asks
			q := dnstest.Query(id, name)
			out, _ = dnsforward.AppendFrame(out, q)
			if name != "never" {
				want[string(dnstest.Answer(q))] = q
			}
		}
		c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(out); err != nil {
			t.Fatal(err)
		}
		return want
	}
	read := func(want map[string][]byte, within time.Duration) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(within))
		for len(want) > 0 {
			reply, err := dnsforward.ReadFrame(c, nil)
			if err != nil {
				t.Fatalf("%d answers missing: %v", len(want), err)
			}
			if _, ok := want[string(reply)]; !ok {
				t.Fatalf("answer %x: not one awaited", reply)
			}
			delete(want, string(reply))
		}
	}
	// Answered well within the unanswered one's QueryTimeout.
	read(send("never", "a", "b", "c", "d", "e"), lim.QueryTimeout/2)
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	read(send(names...), 5*time.Second)
	f.stop()
	if got := f.Stats(); got.TCP != 45 || got.Failed != 1 {
		t.Errorf("counts %+v: want 45 answered, the unanswered one failed", got)
	}
}
