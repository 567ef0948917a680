package dnsforward_test

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
	"github.com/kind-entrypoint/entrypoint/internal/dnsforward/dnstest"
)

var (
	loopA = netip.MustParseAddr("127.0.0.2") // the well-formed client
	loopB = netip.MustParseAddr("127.0.0.3") // the hostile ones
)

// TestClientsThatDoNotRead: two waves of TCP clients, more than the
// connection cap, each send large queries (60 kB answers) and never read
// an answer. Another client's queries, one every 10 ms on one
// connection, are all answered; no connection of the forwarder queues
// more than 320 KiB toward its client; most non-readers are closed
// (the others were refused at the cap), with a reset that drops what was
// queued toward them.
func TestClientsThatDoNotRead(t *testing.T) {
	up := dnstest.Start(t, loop4, 0)
	lim := dnsforward.DefaultLimits()
	lim.Conns, lim.WriteTimeout = 8, 300*time.Millisecond
	f := startOn(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0), up.Addr, lim)
	big := append(dnstest.Query(1, "big"), make([]byte, 60000)...)
	frame, _ := dnsforward.AppendFrame(nil, big)

	var wg sync.WaitGroup
	wave := func() {
		for range lim.Conns + 4 {
			c := dialFrom(t, "tcp", loopB, f.Addr())
			wg.Go(func() {
				// Writes until the forwarder stops reading
				// (or closes the connection): never reads.
				c.SetWriteDeadline(time.Now().Add(3 * time.Second))
				for range 16 {
					if _, err := c.Write(frame); err != nil {
						return
					}
				}
			})
		}
	}
	good := dialFrom(t, "tcp", loopA, f.Addr())
	maxQueue := 0
	for i := range 120 {
		if i == 0 || i == 50 {
			wave()
		}
		q := dnstest.Query(uint16(i), fmt.Sprintf("good-%d", i))
		if _, err := dnstest.Exchange(good, q, 2*time.Second); err != nil {
			t.Fatalf("well-formed query %d: %v (counts %+v)", i, err, f.Stats())
		}
		most, _ := sendQueues(t, f.Addr().Port())
		maxQueue = max(maxQueue, most)
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	// The kernel doubles the 64 KiB asked for (tcpSendBuffer) and lets
	// a write pass it by up to one 64 KiB segment: 192 KiB and a little.
	// Without the cap: 840 kB here (16 answers of 60 kB), megabytes
	// with more.
	const limit = 320 << 10
	t.Logf("largest send queue toward a client: %d bytes; counts %+v", maxQueue, f.Stats())
	if maxQueue > limit {
		t.Errorf("a connection queued %d bytes toward its client, over %d", maxQueue, limit)
	}
	// The non-readers, still open, were closed with a reset: the
	// kernel holds nothing more toward them (the well-formed client's
	// last answer may wait a few ms for its delayed acknowledgement).
	total := 0
	for range 50 {
		if _, total = sendQueues(t, f.Addr().Port()); total == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if total > 0 {
		t.Errorf("%d bytes still queued toward clients the forwarder closed", total)
	}
	f.stop()
	got := f.Stats()
	if got.Unread+got.Evicted < 2*int64(lim.Conns+4)-int64(lim.Conns) {
		t.Errorf("counts %+v: want most of the %d non-readers closed unread or evicted", got, 2*(lim.Conns+4))
	}
	if got.PeakBuffers > int64(lim.MemoryBound()/dnsforward.MaxMessage) {
		t.Errorf("counts %+v: over the bound of buffers", got)
	}
}

// sendQueues are the largest and the total send queue (tx_queue in
// /proc/net/tcp: bytes written and not yet acknowledged) of the sockets
// on local port port: the forwarder's, closed ones included.
func sendQueues(t *testing.T, port uint16) (most, total int) {
	t.Helper()
	fh, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	local := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || !strings.HasSuffix(fields[1], local) {
			continue
		}
		tx, _, _ := strings.Cut(fields[4], ":")
		n, err := strconv.ParseInt(tx, 16, 64)
		if err == nil {
			most, total = max(most, int(n)), total+int(n)
		}
	}
	return most, total
}
