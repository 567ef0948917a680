package etcdpeers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// ticksPerDay is a day of Rounds.Follow's 5 s.
const ticksPerDay = 24 * 60 * 60 / 5

// dayResolver answers lookups from a table built beforehand (a lookup
// allocates nothing of its own), and counts restores without keeping
// them: a day of it holds no more than its first minute.
type dayResolver struct {
	system.System
	answers  map[lookupKey][]netip.Addr
	restores int
}

type lookupKey struct{ network, host string }

var errNoHost = errors.New("no such host")

func (d *dayResolver) LookupIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	a, ok := d.answers[lookupKey{network, host}]
	if !ok {
		return nil, errNoHost
	}
	return a, nil
}

func (d *dayResolver) Run(_ context.Context, argv []string, _ []byte, _ time.Duration) ([]byte, []byte, error) {
	if len(argv) > 1 && argv[1] != "-t" { // a restore, not a save
		d.restores++
	}
	return nil, nil, nil
}

// dayStats is what a simulated day of following cost.
type dayStats struct {
	ticks, moves, gone, restores int
	// heapGrowth is the live heap after the day less that after its
	// first hour (both after a GC); inuseGrowth HeapInuse's.
	heapGrowth, inuseGrowth int64
	// mallocs and bytes allocated over the day after its first hour.
	mallocs, bytes uint64
	log            int // bytes logged
}

// countingWriter counts what is logged, keeping none of it.
type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// simulateDay runs Watch for a day of ticks on a compressed clock, with
// peers peers of which one moves every 997 ticks and one stops resolving
// for 3 ticks every 1500 (what a day of restarts alone would be, many
// times over).
func simulateDay(tb testing.TB, peers, ticks int) dayStats {
	tb.Helper()
	d := &dayResolver{answers: map[lookupKey][]netip.Addr{}}
	cfg := Config{Iptables: "nft", Self: "kind-control-plane"}
	addr := func(i, gen int) netip.Addr { return netip.AddrFrom4([4]byte{172, 18, byte(1 + gen%200), byte(i)}) }
	at := make([]int, peers) // each peer's generation: 1 at first
	for i := range peers {
		at[i] = 1
		name := fmt.Sprintf("kind-control-plane%d", i+2)
		cfg.Peers = append(cfg.Peers, Peer{Name: name, PeerURLs: []string{"https://" + addr(i, 0).String() + ":2380"}})
		// Each generation's answer is built now: a lookup allocates
		// nothing, so what is measured is the watcher's.
		d.answers[lookupKey{"ip4", name}] = []netip.Addr{addr(i, 1)}
	}
	gens := make([][]netip.Addr, 200)
	for g := range gens {
		gens[g] = make([]netip.Addr, peers)
		for i := range peers {
			gens[g][i] = addr(i, g)
		}
	}
	const warm = ticksPerDay / 24
	var s dayStats
	var before, after runtime.MemStats
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lw := &countingWriter{}
	c := &clock{stop: warm + ticks, cancel: cancel, on: func(tick int) {
		if tick == warm {
			runtime.GC()
			runtime.ReadMemStats(&before)
		}
		if tick%997 == 0 {
			i := (tick / 997) % peers
			at[i] = (at[i] + 1) % len(gens)
			d.answers[lookupKey{"ip4", cfg.Peers[i].Name}] = gens[at[i]][i : i+1]
			s.moves++
		}
		if g := tick % 1500; g < 3 {
			i := (tick / 1500) % peers
			k := lookupKey{"ip4", cfg.Peers[i].Name}
			switch g {
			case 0:
				s.gone++
				delete(d.answers, k)
			case 2:
				d.answers[k] = gens[at[i]][i : i+1]
			}
		}
		if tick == warm+ticks {
			runtime.GC()
			runtime.ReadMemStats(&after)
		}
	}}
	err := Watch(ctx, d, logline.New(lw, logline.Text), cfg, Rounds{Max: 300, Interval: 2 * time.Second, Follow: 5 * time.Second, Wait: c.wait})
	if err != context.Canceled {
		tb.Fatalf("Watch: %v", err)
	}
	s.ticks, s.restores, s.log = ticks, d.restores, lw.n
	s.heapGrowth = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	s.inuseGrowth = int64(after.HeapInuse) - int64(before.HeapInuse)
	s.mallocs, s.bytes = after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc
	return s
}

// TestFollowDay: a day of following (17,280 rounds 5 s apart, on a
// compressed clock), peers moving and vanishing now and then, leaves the
// live heap where its first hour left it: nothing the watcher keeps
// grows with time. 64 KiB is what 4 bytes kept a round would pass.
func TestFollowDay(t *testing.T) {
	s := simulateDay(t, 2, ticksPerDay)
	t.Logf("%+v", s)
	if s.heapGrowth > 64<<10 || s.inuseGrowth > 256<<10 {
		t.Errorf("live heap grew %d bytes over a day (HeapInuse %d)", s.heapGrowth, s.inuseGrowth)
	}
	if s.moves == 0 || s.gone == 0 || s.restores < s.moves {
		t.Errorf("%+v: the day had no moves, no failures, or a move without its restore", s)
	}
}

// BenchmarkFollowDay: one op is a simulated day of following kind's HA
// cluster (2 peers) and the cap (MaxMembers-1 peers): what a day costs,
// per round (5 s). The goal: allocations per round a small constant
// (the lookups' contexts), nothing kept (heap-B growth near 0).
func BenchmarkFollowDay(b *testing.B) {
	for _, peers := range []int{2, MaxMembers - 1} {
		b.Run(fmt.Sprintf("peers=%d", peers), func(b *testing.B) {
			var s dayStats
			for b.Loop() {
				s = simulateDay(b, peers, ticksPerDay)
			}
			if s.restores < s.moves {
				b.Fatalf("%+v: a move without its restore", s)
			}
			b.ReportMetric(float64(s.mallocs)/float64(s.ticks), "allocs/round")
			b.ReportMetric(float64(s.bytes)/float64(s.ticks), "B/round")
			b.ReportMetric(float64(s.heapGrowth), "heap-B-growth/day")
			b.ReportMetric(float64(s.restores), "restores/day")
		})
	}
}

// BenchmarkFollowRound: one round in which every peer is where it was,
// the round that runs every 5 s almost all day.
func BenchmarkFollowRound(b *testing.B) {
	for _, peers := range []int{2, MaxMembers - 1} {
		b.Run(fmt.Sprintf("peers=%d", peers), func(b *testing.B) {
			d := &dayResolver{answers: map[lookupKey][]netip.Addr{}}
			cfg := Config{Iptables: "nft"}
			for i := range peers {
				name := fmt.Sprintf("cp%d", i)
				cfg.Peers = append(cfg.Peers, Peer{Name: name, PeerURLs: []string{fmt.Sprintf("https://172.18.0.%d:2380", i+2)}})
				d.answers[lookupKey{"ip4", name}] = []netip.Addr{netip.AddrFrom4([4]byte{172, 18, 1, byte(i + 2)})}
			}
			w, _ := NewWatcher(d, cfg)
			log := logline.New(io.Discard, logline.Text)
			if err := w.apply(context.Background(), log, w.Round(context.Background())); err != nil || !w.Done() {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := w.apply(context.Background(), log, w.Round(context.Background())); err != nil {
					b.Fatal(err)
				}
			}
			if d.restores != 1 {
				b.Fatalf("%d restores, want only the first round's", d.restores)
			}
		})
	}
}
