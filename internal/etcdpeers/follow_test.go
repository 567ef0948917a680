package etcdpeers

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// run is the iptables-nft-restore the watcher plans for IPv4 rules
// (none: an empty chain), with the jump when jump: argv, then stdin.
func run(jump bool, rules ...string) string {
	s := "iptables-nft-restore --noflush\n*nat\n:KIND-ETCD-PEERS - [0:0]\n"
	if jump {
		s += "-A OUTPUT -j KIND-ETCD-PEERS\n"
	}
	for _, r := range rules {
		s += "-A KIND-ETCD-PEERS -d " + r + "\n"
	}
	return s + "COMMIT\n"
}

// round runs one round and records its restores as installed, as Watch
// does when they succeed: its log lines, then its restores as run shows
// them.
func round(w *Watcher) []string {
	c := w.Round(context.Background())
	out := rendered(c.Logs)
	for _, r := range c.Restores {
		x := r.Action.Extras()
		out = append(out, strings.Join(x.Argv, " ")+"\n"+string(x.Stdin))
		w.Installed(r.V6)
	}
	return out
}

// TestFollowMoves: after the first rounds, a peer restarted alone at a
// new address gets its rule replaced in one restore of the whole chain,
// said in one line; a round that finds every peer where it was plans
// nothing; a peer back at its recorded address loses its rule.
func TestFollowMoves(t *testing.T) {
	f := &fakeResolver{answers: map[string]string{"ip4 kind-control-plane2": "172.18.0.3", "ip4 kind-control-plane3": "172.18.0.4"}}
	w, _ := NewWatcher(f, Config{Iptables: "nft", Peers: cfg3.Peers[:2]})
	const r2 = "172.18.0.5/32 -p tcp -m tcp --dport 2380 -j DNAT --to-destination "
	const r3 = "172.18.0.4/32 -p tcp -m tcp --dport 2380 -j DNAT --to-destination "
	steps := []struct {
		name    string
		answers map[string]string
		want    []string
	}{
		{"first round", nil, []string{
			"log INFO: etcd peer kind-control-plane2: 172.18.0.5:2380 -> 172.18.0.3:2380",
			"log INFO: etcd peer kind-control-plane3: still at 172.18.0.4:2380, no redirect needed",
			run(true, r2+"172.18.0.3:2380"),
		}},
		{"nothing moved", nil, nil},
		{"2 restarted alone", map[string]string{"ip4 kind-control-plane2": "172.18.0.6"}, []string{
			"log INFO: etcd peer kind-control-plane2 moved: 172.18.0.3:2380 -> 172.18.0.6:2380 (recorded 172.18.0.5:2380: redirected)",
			run(false, r2+"172.18.0.6:2380"),
		}},
		{"still there", nil, nil},
		{"3 moved off its recorded address", map[string]string{"ip4 kind-control-plane3": "172.18.0.7"}, []string{
			"log INFO: etcd peer kind-control-plane3 moved: 172.18.0.4:2380 -> 172.18.0.7:2380 (recorded 172.18.0.4:2380: redirected)",
			run(false, r2+"172.18.0.6:2380", r3+"172.18.0.7:2380"),
		}},
		{"2 back at its recorded address", map[string]string{"ip4 kind-control-plane2": "172.18.0.5"}, []string{
			"log INFO: etcd peer kind-control-plane2 moved: 172.18.0.6:2380 -> 172.18.0.5:2380 (recorded 172.18.0.5:2380: no redirect needed)",
			run(false, r3+"172.18.0.7:2380"),
		}},
		{"3 back too", map[string]string{"ip4 kind-control-plane3": "172.18.0.4"}, []string{
			"log INFO: etcd peer kind-control-plane3 moved: 172.18.0.7:2380 -> 172.18.0.4:2380 (recorded 172.18.0.4:2380: no redirect needed)",
			run(false),
		}},
		{"quiet again", nil, nil},
	}
	for _, s := range steps {
		for k, v := range s.answers {
			f.answers[k] = v
		}
		if diff := cmp.Diff(s.want, round(w)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
}

// TestFollowFlaps: a peer that moves at every round is redirected at
// every round, one line and one restore each, always to where it is
// now; a family whose restore failed is written again at the next
// round, without a second jump from OUTPUT, while the other family,
// installed, is left alone.
func TestFollowFlaps(t *testing.T) {
	f := &fakeResolver{answers: map[string]string{"ip4 kind-control-plane2": "172.18.0.3", "ip6 kind-control-plane4": "fc00::2"}, failV6: true}
	w, _ := NewWatcher(f, Config{Iptables: "nft", Peers: []Peer{cfg3.Peers[0], cfg3.Peers[2]}})
	flaps := []string{"172.18.0.3", "172.18.0.6", "172.18.0.3", "172.18.0.6", "172.18.0.6"}
	for i, at := range flaps {
		f.answers["ip4 kind-control-plane2"] = at
		f.runs = nil
		err := w.apply(context.Background(), nil, w.Round(context.Background()))
		if err == nil {
			t.Fatalf("round %d: no error although ip6tables fails", i)
		}
		var v4, v6 []string
		for _, r := range f.runs {
			if strings.HasPrefix(r, "ip6") {
				v6 = append(v6, r)
			} else {
				v4 = append(v4, r)
			}
		}
		if len(v6) != 1 || !strings.Contains(v6[0], "-A OUTPUT -j "+Chain) {
			t.Errorf("round %d: IPv6 restores %q, want one with its jump (none was installed)", i, v6)
		}
		moved := i == 0 || at != flaps[i-1]
		if !moved && len(v4) != 0 || moved && len(v4) != 1 {
			t.Fatalf("round %d: IPv4 restores %q, moved %v: want one restore for a move, none else", i, v4, moved)
		}
		if moved {
			if want := "--to-destination " + at + ":2380"; !strings.Contains(v4[0], want) {
				t.Errorf("round %d: %q lacks %q", i, v4[0], want)
			}
			if jump := strings.Contains(v4[0], "-A OUTPUT"); jump != (i == 0) {
				t.Errorf("round %d: jump from OUTPUT %v, want it in the first restore only", i, jump)
			}
		}
	}
}

// TestFollowDisappears: a peer that stops resolving keeps its rule,
// said once however long it lasts, and once when it resolves again; a
// peer that comes back elsewhere is said to have moved.
func TestFollowDisappears(t *testing.T) {
	f := &fakeResolver{answers: map[string]string{"ip4 kind-control-plane2": "172.18.0.3", "ip4 kind-control-plane3": "172.18.0.4"}}
	w, _ := NewWatcher(f, Config{Iptables: "nft", Peers: cfg3.Peers[:2]})
	round(w)
	var got []string
	gone := func(n int) {
		delete(f.answers, "ip4 kind-control-plane2")
		delete(f.answers, "ip4 kind-control-plane3")
		for range n {
			got = append(got, round(w)...)
		}
	}
	gone(10)
	f.answers["ip4 kind-control-plane2"] = "172.18.0.3"
	f.answers["ip4 kind-control-plane3"] = "172.18.0.4"
	got = append(got, round(w)...)
	got = append(got, round(w)...)
	gone(3)
	f.answers["ip4 kind-control-plane2"] = "172.18.0.8"
	f.answers["ip4 kind-control-plane3"] = "172.18.0.4"
	got = append(got, round(w)...)
	want := []string{
		"log WARN: etcd peer kind-control-plane2 stopped resolving (no such host): its redirect to 172.18.0.3:2380 stays",
		"log WARN: etcd peer kind-control-plane3 stopped resolving (no such host): left at its recorded 172.18.0.4:2380",
		"log INFO: etcd peer kind-control-plane2 resolves again, still at 172.18.0.3:2380",
		"log INFO: etcd peer kind-control-plane3 resolves again, still at 172.18.0.4:2380",
		"log WARN: etcd peer kind-control-plane2 stopped resolving (no such host): its redirect to 172.18.0.3:2380 stays",
		"log WARN: etcd peer kind-control-plane3 stopped resolving (no such host): left at its recorded 172.18.0.4:2380",
		"log INFO: etcd peer kind-control-plane2 moved: 172.18.0.3:2380 -> 172.18.0.8:2380 (recorded 172.18.0.5:2380: redirected)",
		run(false, "172.18.0.5/32 -p tcp -m tcp --dport 2380 -j DNAT --to-destination 172.18.0.8:2380"),
		"log INFO: etcd peer kind-control-plane3 resolves again, still at 172.18.0.4:2380",
	}
	// The order within a round is the peers'; the restore comes last.
	want[7], want[8] = want[8], want[7]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if ms := w.Mappings(); len(ms) != 1 || ms[0].To.String() != "172.18.0.8:2380" {
		t.Errorf("mappings %v", ms)
	}
}

// TestPick: what a lookup's answers make of a peer's address, forged
// or odd answers included.
func TestPick(t *testing.T) {
	recorded := netip.MustParseAddr("172.18.0.5")
	now := netip.MustParseAddr("172.18.0.3")
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name    string
		answers []netip.Addr
		v6      bool
		now     netip.Addr
		want    string // "" none
	}{
		{"one", []netip.Addr{a("172.18.0.9")}, false, now, "172.18.0.9"},
		{"none", nil, false, now, ""},
		{"duplicated", []netip.Addr{a("172.18.0.9"), a("172.18.0.9")}, false, now, "172.18.0.9"},
		{"several, the current one among them", []netip.Addr{a("172.18.0.9"), a("172.18.0.3")}, false, now, "172.18.0.3"},
		{"several, the recorded one among them", []netip.Addr{a("172.18.0.9"), a("172.18.0.5")}, false, now, "172.18.0.5"},
		{"several, neither", []netip.Addr{a("172.18.0.9"), a("172.18.0.8")}, false, now, "172.18.0.9"},
		{"several, never resolved yet", []netip.Addr{a("172.18.0.9"), a("172.18.0.5")}, false, netip.Addr{}, "172.18.0.5"},
		{"wrong family", []netip.Addr{a("fc00::9")}, false, now, ""},
		{"wrong family first", []netip.Addr{a("fc00::9"), a("172.18.0.9")}, false, now, "172.18.0.9"},
		{"IPv4-mapped, asked for IPv4", []netip.Addr{a("::ffff:172.18.0.9")}, false, now, "172.18.0.9"},
		{"IPv4-mapped, asked for IPv6", []netip.Addr{a("::ffff:172.18.0.9")}, true, netip.Addr{}, ""},
		{"loopback", []netip.Addr{a("127.0.0.1")}, false, now, ""},
		{"loopback first", []netip.Addr{a("127.0.0.1"), a("172.18.0.9")}, false, now, "172.18.0.9"},
		{"IPv6 loopback", []netip.Addr{a("::1")}, true, netip.Addr{}, ""},
		{"unspecified", []netip.Addr{a("0.0.0.0")}, false, now, ""},
		{"multicast", []netip.Addr{a("224.0.0.1")}, false, now, ""},
		{"link-local", []netip.Addr{a("169.254.0.1")}, false, now, ""},
		{"IPv6 link-local, zoned", []netip.Addr{a("fe80::1%eth0")}, true, netip.Addr{}, ""},
		{"IPv6 global, zoned", []netip.Addr{a("fc00::1%eth0")}, true, netip.Addr{}, ""},
		{"IPv6", []netip.Addr{a("fc00::1")}, true, netip.Addr{}, "fc00::1"},
		{"invalid", []netip.Addr{{}}, false, now, ""},
	} {
		rec := recorded
		if tc.v6 {
			rec = a("fc00::5")
		}
		got := pick(tc.answers, tc.v6, tc.now, rec)
		if want := tc.want; (want == "" && got.IsValid()) || (want != "" && got.String() != want) {
			t.Errorf("%s: %v, want %q", tc.name, got, want)
		}
	}
}

// TestFollowForgedAnswers: answers that name no node's address are a
// failed lookup (the rule stays); an answer that lists the current
// address among others changes nothing, whatever its order.
func TestFollowForgedAnswers(t *testing.T) {
	f := &fakeResolver{answers: map[string]string{"ip4 kind-control-plane2": "172.18.0.3"}}
	w, _ := NewWatcher(f, Config{Iptables: "nft", Peers: cfg3.Peers[:1]})
	round(w)
	for _, answer := range []string{"172.18.0.9,172.18.0.3", "172.18.0.3,172.18.0.9", "127.0.0.1,172.18.0.3"} {
		f.answers["ip4 kind-control-plane2"] = answer
		if got := round(w); len(got) != 0 {
			t.Errorf("%s: %q, want nothing: the current address is among them", answer, got)
		}
	}
	var got []string
	for _, answer := range []string{"127.0.0.1", "fc00::3", "", "127.0.0.1,::1"} {
		f.answers["ip4 kind-control-plane2"] = answer
		got = append(got, round(w)...)
	}
	want := []string{"log WARN: etcd peer kind-control-plane2 stopped resolving (no address of a node in the answer): its redirect to 172.18.0.3:2380 stays"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if ms := w.Mappings(); len(ms) != 1 || ms[0].To.String() != "172.18.0.3:2380" {
		t.Errorf("mappings %v, want the last one kept", ms)
	}
}

// TestFollowEarlierRun: a run that finds the jump an earlier run left
// (systemd restarted the command) writes the chain from what it finds,
// even when every peer is back at its recorded address: the earlier
// rules may send a peer where it no longer is.
func TestFollowEarlierRun(t *testing.T) {
	f := &fakeResolver{answers: map[string]string{"ip4 kind-control-plane2": "172.18.0.5"}, saved: "*nat\n-A OUTPUT -j KIND-ETCD-PEERS\nCOMMIT\n"}
	w, _ := NewWatcher(f, Config{Iptables: "nft", Peers: cfg3.Peers[:1]})
	w.ProbeJumps(context.Background())
	want := []string{
		"log INFO: etcd peer kind-control-plane2: still at 172.18.0.5:2380, no redirect needed",
		run(false),
		strings.Replace(run(false), "iptables-", "ip6tables-", 1),
	}
	if diff := cmp.Diff(want, round(w)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := round(w); len(got) != 0 {
		t.Errorf("second round %q", got)
	}
}

// clock is a Rounds.Wait of a test: every wait returns at once, after
// on(tick) (tick counts the waits from 1); the run is cancelled at tick
// stop. waited are the waits' durations.
type clock struct {
	on     func(tick int)
	stop   int
	cancel context.CancelFunc
	ticks  int
	waited map[time.Duration]int
}

func (c *clock) wait(ctx context.Context, d time.Duration) error {
	c.ticks++
	if c.waited != nil {
		c.waited[d]++
	}
	if c.on != nil {
		c.on(c.ticks)
	}
	if c.ticks >= c.stop {
		c.cancel()
	}
	return ctx.Err()
}

// TestWatchFollows: the log of a run through its first rounds and then
// following, with a peer found late, one restarted alone at a new
// address, and one that stops resolving for a while.
func TestWatchFollows(t *testing.T) {
	f := &fakeResolver{answers: map[string]string{"ip4 kind-control-plane2": "172.18.0.3"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &clock{stop: 12, cancel: cancel, waited: map[time.Duration]int{}, on: func(tick int) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch tick {
		case 3: // the first wait of following
			f.answers["ip4 kind-control-plane3"] = "172.18.0.4"
		case 5:
			f.answers["ip4 kind-control-plane2"] = "172.18.0.6"
		case 7:
			delete(f.answers, "ip4 kind-control-plane2")
		case 10:
			f.answers["ip4 kind-control-plane2"] = "172.18.0.6"
		}
	}}
	var log strings.Builder
	err := Watch(ctx, f, logline.New(&log, logline.Text), Config{Iptables: "nft", Self: "kind-control-plane", Peers: cfg3.Peers[:2]},
		Rounds{Max: 3, Interval: 2 * time.Second, Follow: 5 * time.Second, Wait: c.wait})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Watch: %v, want it to run until cancelled", err)
	}
	want := `INFO: mapping etcd's peers of kind-control-plane to their current addresses
INFO: etcd peer kind-control-plane2: 172.18.0.5:2380 -> 172.18.0.3:2380
WARN: etcd peer not resolved yet, looked up again every 5s: kind-control-plane3 (recorded 172.18.0.4:2380): no such host
INFO: etcd peer redirects: kind-control-plane2 172.18.0.5:2380 -> 172.18.0.3:2380
INFO: following etcd's peers: each name looked up every 5s, a peer that moves redirected anew
INFO: etcd peer kind-control-plane3: still at 172.18.0.4:2380, no redirect needed
INFO: etcd peer kind-control-plane2 moved: 172.18.0.3:2380 -> 172.18.0.6:2380 (recorded 172.18.0.5:2380: redirected)
WARN: etcd peer kind-control-plane2 stopped resolving (no such host): its redirect to 172.18.0.6:2380 stays
INFO: etcd peer kind-control-plane2 resolves again, still at 172.18.0.6:2380
`
	if diff := cmp.Diff(want, log.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[time.Duration]int{2 * time.Second: 2, 5 * time.Second: 10}, c.waited); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if len(f.runs) != 2 {
		t.Errorf("%d restores, want 2 (the first mapping, the move): %q", len(f.runs), f.runs)
	}
}

// TestTimerWait: the default Wait waits, and returns at once when the
// context is done; one timer serves every wait.
func TestTimerWait(t *testing.T) {
	wait := timerWait()
	start := time.Now()
	for range 3 {
		if err := wait(context.Background(), time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 3*time.Millisecond {
		t.Errorf("3 waits of 1ms took %s", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
	if err := wait(context.Background(), time.Millisecond); err != nil {
		t.Errorf("a wait after a cancelled one: %v", err)
	}
}
