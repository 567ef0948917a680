package dnsforward_test

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
	"github.com/kind-entrypoint/entrypoint/internal/dnsforward/dnstest"
)

// BenchmarkQuery is the forwarder's cost: queries answered by a stand-in
// resolver on 127.0.0.1, asked directly and through a forwarder on ::1,
// over UDP and TCP (one connection per client), by 1 client (latency) and
// by 16 at once (throughput). It reports queries a second and the 50th
// and 99th percentile of a query's round trip; the goal is under 1 ms
// added at p99 (docs/performance.md).
func BenchmarkQuery(b *testing.B) {
	up := dnstest.Start(b, loop4, 0)
	f, err := dnsforward.Listen(b.Context(), dnsforward.Config{Listen: loop6, Upstream: up.Addr, Limits: dnsforward.DefaultLimits()})
	if err != nil {
		b.Fatal(err)
	}
	go f.Serve(b.Context(), time.Hour)
	for _, path := range []struct {
		name string
		addr netip.AddrPort
	}{{"direct", up.Addr}, {"forwarder", f.Addr()}} {
		for _, network := range []string{"udp", "tcp"} {
			for _, clients := range []int{1, 16} {
				b.Run(path.name+"/"+network+"/clients="+itoa(clients), func(b *testing.B) {
					benchQueries(b, network, path.addr, clients)
				})
			}
		}
	}
}

func benchQueries(b *testing.B, network string, addr netip.AddrPort, clients int) {
	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := net.Dial(network, addr.String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	q := dnstest.Query(1, "kind-control-plane")
	lat := make([][]time.Duration, clients)
	buf := make([][]byte, clients)
	for i := range buf {
		buf[i] = make([]byte, dnsforward.MaxMessage)
		lat[i] = make([]time.Duration, 0, b.N)
	}
	var next sync.Mutex
	n := 0
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			for {
				next.Lock()
				if n == b.N {
					next.Unlock()
					return
				}
				n++
				next.Unlock()
				t0 := time.Now()
				if err := exchange(c, q, buf[i]); err != nil {
					b.Error(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	pct := func(p int) float64 { return float64(all[(len(all)-1)*p/100].Nanoseconds()) / 1000 }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "queries/s")
	b.ReportMetric(pct(50), "p50-µs")
	b.ReportMetric(pct(99), "p99-µs")
}

// exchange is dnstest.Exchange without its allocations (a buffer of its
// own per call): what is measured is the path, not the client's garbage.
func exchange(c net.Conn, q, buf []byte) error {
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if _, stream := c.(*net.TCPConn); stream {
		out, _ := dnsforward.AppendFrame(buf[:0], q)
		if _, err := c.Write(out); err != nil {
			return err
		}
		reply, err := dnsforward.ReadFrame(c, buf)
		if err == nil && !dnsforward.IsReplyTo(reply, dnsforward.ID(q)) {
			err = errors.New("not the reply")
		}
		return err
	}
	if _, err := c.Write(q); err != nil {
		return err
	}
	n, err := c.Read(buf)
	if err == nil && !dnsforward.IsReplyTo(buf[:n], dnsforward.ID(q)) {
		err = errors.New("not the reply")
	}
	return err
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
