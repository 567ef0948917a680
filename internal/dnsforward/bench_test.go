package dnsforward_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
	"github.com/kind-entrypoint/entrypoint/internal/dnsforward/dnstest"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// BenchmarkQuery is the forwarder's cost: queries answered by a stand-in
// resolver on 127.0.0.1, asked directly and through a forwarder on ::1
// (IPv6 in front, IPv4 behind, as on a node), over UDP and TCP (one
// connection per client), by 1 client (latency) and by 16 at once
// (throughput). The forwarder runs in the benchmark's process
// ("forwarder") and, as on a node, in a process of its own
// ("forwarder-process"): in one process the clients' goroutines and the
// forwarder's share two Ps, and a goroutine woken by the network waits
// for a P the clients hold (up to the 10 ms of the runtime's sysmon),
// which the forwarder's two waits per query meet twice as often as the
// direct path's one. It reports queries a second and the 50th and 99th
// percentile of a query's round trip; the goal is under 1 ms added at
// p99 (docs/performance.md).
func BenchmarkQuery(b *testing.B) {
	up := dnstest.Start(b, loop4, 0)
	f, err := dnsforward.Listen(b.Context(), dnsforward.Config{Listen: loop6, Upstream: up.Addr, Limits: dnsforward.DefaultLimits()})
	if err != nil {
		b.Fatal(err)
	}
	go f.Serve(b.Context(), time.Hour)
	upProcess, _ := benchProcess(b, "standin")
	fProcess, fPid := benchProcess(b, upProcess.String())
	for _, path := range []struct {
		name string
		addr netip.AddrPort
		pid  int // the forwarder's process, whose CPU time is reported
	}{{"direct", up.Addr, 0}, {"forwarder", f.Addr(), 0}, {"direct-process", upProcess, 0}, {"forwarder-process", fProcess, fPid}} {
		for _, network := range []string{"udp", "tcp"} {
			for _, clients := range []int{1, 16} {
				b.Run(path.name+"/"+network+"/clients="+itoa(clients), func(b *testing.B) {
					cpu := processCPU(b, path.pid)
					benchQueries(b, network, path.addr, clients)
					if path.pid != 0 {
						b.ReportMetric(float64((processCPU(b, path.pid)-cpu).Microseconds())/float64(b.N), "fwd-cpu-µs/query")
					}
				})
			}
		}
	}
}

// benchServer makes the test binary a server for BenchmarkQuery
// (TestMain): "standin", a stand-in resolver on 127.0.0.1, else a
// forwarder on ::1 to the upstream it names. It prints its address and
// serves until its standard input ends.
const benchServer = "DNSFORWARD_BENCH_SERVER"

func TestMain(m *testing.M) {
	if what := os.Getenv(benchServer); what != "" {
		os.Exit(serveForBench(what))
	}
	os.Exit(m.Run())
}

func serveForBench(what string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if what == "standin" {
		s, err := dnstest.Listen(loop4, dnstest.Behaviour{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(s.Addr)
		<-ctx.Done()
		s.Close()
		return 0
	}
	up, err := netip.ParseAddrPort(what)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	f, err := dnsforward.Listen(ctx, dnsforward.Config{Listen: loop6, Upstream: up, Limits: dnsforward.DefaultLimits(), Log: logline.New(io.Discard, logline.Text)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(f.Addr())
	if err := f.Serve(ctx, time.Hour); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// benchProcess starts this test binary as the server what names
// (benchServer) until the benchmark ends, and returns its address and
// process ID.
func benchProcess(b *testing.B, what string) (netip.AddrPort, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchServer+"="+what)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(io.LimitReader(stdout, 100)).ReadString('\n')
	addr, perr := netip.ParseAddrPort(strings.TrimSpace(line))
	if err != nil || perr != nil {
		b.Fatalf("%s process: %q: %v %v", what, line, err, perr)
	}
	return addr, cmd.Process.Pid
}

// processCPU is the CPU time process pid has used (user and system, all
// its threads, in clock ticks of 10 ms: a benchmark of 20000 queries
// takes some 40 of them), or 0 for pid 0: a cost per query that the
// machine's other load hardly moves, unlike the latencies.
func processCPU(b *testing.B, pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// After the command's name in parentheses: utime and stime are
	// fields 14 and 15 of the whole line.
	_, rest, _ := strings.Cut(string(stat), ") ")
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, stat)
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
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
