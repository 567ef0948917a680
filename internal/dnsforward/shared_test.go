package dnsforward_test

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
	"github.com/kind-entrypoint/entrypoint/internal/dnsforward/dnstest"
)

// TestSharedUpstreamSocket attacks the one UDP socket that every query in
// flight shares: 64 clients ask at once, all with the same DNS ID, and
// an upstream of the test's own waits for all 64 queries, then answers
// them in reverse order, each preceded by two forgeries (its upstream ID
// with another query's question, and another query's answer under an ID
// nobody holds) and followed by a copy. Every client must get its own
// answer, under its own ID; the 64 queries must have gone upstream under
// 64 different IDs; and the forgeries and copies must be dropped.
func TestSharedUpstreamSocket(t *testing.T) {
	const clients = 64
	up, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(loop4))
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	ids := make(chan map[uint16]bool, 1)
	go func() {
		type query struct {
			msg  []byte
			from *net.UDPAddr
		}
		var qs []query
		seen := map[uint16]bool{}
		buf := make([]byte, dnsforward.MaxMessage)
		for len(qs) < clients {
			n, from, err := up.ReadFromUDP(buf)
			if err != nil {
				return
			}
			qs = append(qs, query{bytes.Clone(buf[:n]), from})
			seen[dnsforward.ID(buf[:n])] = true
		}
		ids <- seen
		for i := len(qs) - 1; i >= 0; i-- {
			q, other := qs[i], qs[(i+1)%len(qs)]
			wrongQuestion := dnstest.Answer(other.msg)
			copy(wrongQuestion, q.msg[:2])
			unheld := dnstest.Answer(other.msg)
			unheld[0], unheld[1] = ^q.msg[0], ^q.msg[1]
			for seen[dnsforward.ID(unheld)] {
				unheld[1]++
			}
			for _, reply := range [][]byte{wrongQuestion, unheld, dnstest.Answer(q.msg), dnstest.Duplicate(dnstest.Answer(q.msg))} {
				if _, err := up.WriteToUDP(reply, q.from); err != nil {
					return
				}
			}
		}
	}()
	f := start(t, up.LocalAddr().(*net.UDPAddr).AddrPort(), dnsforward.DefaultLimits())
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := dial(t, "udp", f.Addr())
		wg.Go(func() {
			q := dnstest.Query(7, fmt.Sprintf("client-%d", i))
			reply, err := dnstest.Exchange(c, q, 5*time.Second)
			if err == nil && !bytes.Equal(reply, dnstest.Answer(q)) {
				err = fmt.Errorf("got %x, want %x", reply, dnstest.Answer(q))
			}
			if err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	select {
	case seen := <-ids:
		if len(seen) != clients {
			t.Errorf("%d queries went upstream under %d IDs, want %d different", clients, len(seen), clients)
		}
	default:
		t.Error("the upstream did not see every query")
	}
	time.Sleep(50 * time.Millisecond) // the last copies
	f.stop()
	if got := f.Stats(); got.UDP != clients || got.Garbage != 3*clients || got.Failed != 0 {
		t.Errorf("counts %+v, want %d answered and %d forgeries and copies dropped", got, clients, 3*clients)
	}
}
