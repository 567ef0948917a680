package etcdpeers

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// fakeResolver answers lookups from a table the test changes between
// rounds, and records the commands run; anything else of System is
// unexpected (its nil interface panics).
type fakeResolver struct {
	system.System
	mu      sync.Mutex
	answers map[string]string // "ip4 name" -> addresses, comma-separated; missing: no such host
	runs    []string          // argv, then stdin
	saved   string            // what a save prints
	failRun bool
	failV6  bool // ip6tables restores fail
}

func (f *fakeResolver) LookupIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.answers[network+" "+host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for s := range strings.SplitSeq(a, ",") {
		if s != "" {
			out = append(out, netip.MustParseAddr(s))
		}
	}
	return out, nil
}

func (f *fakeResolver) Run(_ context.Context, argv []string, stdin []byte, _ time.Duration) ([]byte, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.HasSuffix(argv[0], "-save") {
		return []byte(f.saved), nil, nil
	}
	f.runs = append(f.runs, strings.Join(argv, " ")+"\n"+string(stdin))
	if f.failRun || f.failV6 && strings.HasPrefix(argv[0], "ip6") {
		return nil, []byte("iptables-restore: line 2 failed"), errors.New("exit status 1")
	}
	return nil, nil, nil
}

var cfg3 = Config{Iptables: "nft", Self: "kind-control-plane", Peers: []Peer{
	{Name: "kind-control-plane2", PeerURLs: []string{"https://172.18.0.5:2380"}},
	{Name: "kind-control-plane3", PeerURLs: []string{"https://172.18.0.4:2380"}},
	{Name: "kind-control-plane4", PeerURLs: []string{"https://[fc00::9]:2380"}},
}}

// TestRounds: peers settle as they come up; each round with new
// mappings rewrites the chain of its family; the jump is added once.
func TestRounds(t *testing.T) {
	f := &fakeResolver{answers: map[string]string{"ip4 kind-control-plane2": "172.18.0.3"}}
	w, logs := NewWatcher(f, cfg3)
	if len(logs) != 0 {
		t.Fatalf("logs %v", rendered(logs))
	}
	got := rendered(w.Round(context.Background()).Actions())
	want := []string{
		"log INFO: etcd peer kind-control-plane2: 172.18.0.5:2380 -> 172.18.0.3:2380",
		"run iptables-nft-restore --noflush < \"*nat\\n:KIND-ETCD-PEERS - [0:0]\\n-A OUTPUT -j KIND-ETCD-PEERS\\n-A KIND-ETCD-PEERS -d 172.18.0.5/32 -p tcp -m tcp --dport 2380 -j DNAT --to-destination 172.18.0.3:2380\\nCOMMIT\\n\" (timeout 10s)  # 1 etcd peer redirect(s)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("round 1 (-want +got):\n%s", diff)
	}
	w.Installed(false)
	// kind-control-plane3 comes up where it was; 4 (IPv6) moves.
	f.answers["ip4 kind-control-plane3"] = "172.18.0.4"
	f.answers["ip6 kind-control-plane4"] = "fc00::2"
	got = rendered(w.Round(context.Background()).Actions())
	want = []string{
		"log INFO: etcd peer kind-control-plane3: still at 172.18.0.4:2380, no redirect needed",
		"log INFO: etcd peer kind-control-plane4: [fc00::9]:2380 -> [fc00::2]:2380",
		"run ip6tables-nft-restore --noflush < \"*nat\\n:KIND-ETCD-PEERS - [0:0]\\n-A OUTPUT -j KIND-ETCD-PEERS\\n-A KIND-ETCD-PEERS -d fc00::9/128 -p tcp -m tcp --dport 2380 -j DNAT --to-destination [fc00::2]:2380\\nCOMMIT\\n\" (timeout 10s)  # 1 etcd peer redirect(s)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("round 2 (-want +got):\n%s", diff)
	}
	w.Installed(true)
	if !w.Done() {
		t.Errorf("not done; unresolved %v", w.Unresolved())
	}
	if got := w.Round(context.Background()).Actions(); len(got) != 0 {
		t.Errorf("a round after all settled: %v", rendered(got))
	}
}

// TestRoundsJumpThere: a jump an earlier run left is not added again.
func TestRoundsJumpThere(t *testing.T) {
	f := &fakeResolver{answers: map[string]string{"ip4 kind-control-plane2": "172.18.0.3"}, saved: "*nat\n-A OUTPUT -j KIND-ETCD-PEERS\nCOMMIT\n"}
	w, _ := NewWatcher(f, Config{Iptables: "legacy", Peers: cfg3.Peers[:1]})
	w.ProbeJumps(context.Background())
	for _, a := range rendered(w.Round(context.Background()).Actions()) {
		if strings.Contains(a, "-A OUTPUT") {
			t.Errorf("jump added again: %s", a)
		}
	}
}

// TestWatch: a peer that never resolves (a deleted node) is logged and
// left alone, and the run ends after its rounds; a failed restore is
// tried again.
func TestWatch(t *testing.T) {
	f := &fakeResolver{answers: map[string]string{"ip4 kind-control-plane2": "172.18.0.3"}, failRun: true}
	var log strings.Builder
	err := Watch(context.Background(), f, logline.New(&log, logline.Text), Config{Iptables: "nft", Self: "a", Peers: cfg3.Peers[:2]}, Rounds{Max: 3})
	if err == nil {
		t.Error("no error although every restore failed")
	}
	if len(f.runs) != 3 {
		t.Errorf("%d restores, want one a round (3): the failed one is tried again", len(f.runs))
	}
	out := log.String()
	for _, want := range []string{
		"INFO: etcd peer kind-control-plane2: 172.18.0.5:2380 -> 172.18.0.3:2380\n",
		"WARN: etcd peer never resolved, left alone: kind-control-plane3 (recorded 172.18.0.4:2380): no such host\n",
		"INFO: etcd peer redirects: kind-control-plane2 172.18.0.5:2380 -> 172.18.0.3:2380\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	f.failRun = false
	f.runs = nil
	if err := Watch(context.Background(), f, logline.New(io.Discard, logline.Text), Config{Iptables: "nft", Peers: cfg3.Peers[:1]}, Rounds{Max: 300, Interval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if len(f.runs) != 1 {
		t.Errorf("%d restores, want 1: every peer mapped in the first round ends the run", len(f.runs))
	}
}

// TestReadConfigRefuses: the peers file is checked before any name is
// looked up.
func TestReadConfigRefuses(t *testing.T) {
	for name, content := range map[string]string{
		"mode":    `{"iptables":"sh","peers":[]}`,
		"name":    `{"iptables":"nft","peers":[{"name":"a b","peerURLs":[]}]}`,
		"unknown": `{"iptables":"nft","extra":1}`,
		"garbage": `x`,
	} {
		tree := hostTree(t, map[string]string{"run/kind-etcd-peers.json": content})
		if _, err := ReadConfig(tree); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// savedRules is a System whose every command prints out, the same bytes
// each time: nothing of the fake's own to count.
type savedRules struct {
	system.System
	out []byte
}

func (s savedRules) Run(context.Context, []string, []byte, time.Duration) ([]byte, []byte, error) {
	return s.out, nil, nil
}

// TestProbeJumpsLines: the jump is found as a whole line, anywhere.
func TestProbeJumpsLines(t *testing.T) {
	for out, want := range map[string]bool{
		"":                                           false,
		"-A OUTPUT -j KIND-ETCD-PEERS":               true,
		"*nat\n-A OUTPUT -j KIND-ETCD-PEERS":         true,
		"-A OUTPUT -j KIND-ETCD-PEERS\nCOMMIT\n":     true,
		"\n\n-A OUTPUT -j KIND-ETCD-PEERS\n\n":       true,
		"-A OUTPUT -j KIND-ETCD-PEERS\r\n":           false,
		"-A OUTPUT -j KIND-ETCD-PEERS2\n":            false,
		"x-A OUTPUT -j KIND-ETCD-PEERS\n":            false,
		"-A OUTPUT -j KIND-ETCD-PEERS -m comment\n":  false,
		"-A PREROUTING -j KIND-ETCD-PEERS\nCOMMIT\n": false,
	} {
		w, _ := NewWatcher(savedRules{out: []byte(out)}, cfg3)
		w.ProbeJumps(context.Background())
		if w.jumped[0] != want || w.jumped[1] != want {
			t.Errorf("%q: jumped %v, want %v", out, w.jumped, want)
		}
	}
}

// TestProbeJumpsMemory: a save of n lines, the jump last, costs no more
// to probe than one of 2n: the lines are read in place (the unit has
// 64 MiB, a save may print as much).
func TestProbeJumpsMemory(t *testing.T) {
	cost := func(lines int) uint64 {
		out := []byte(strings.Repeat("-A KUBE-SERVICES -j KUBE-NODEPORTS\n", lines) + "-A OUTPUT -j " + Chain + "\n")
		w, _ := NewWatcher(savedRules{out: out}, cfg3)
		return bytesPerRun(5, func() {
			w.ProbeJumps(context.Background())
			if !w.jumped[0] || !w.jumped[1] {
				t.Fatal("jump not found")
			}
		})
	}
	const n = 50000
	small, large := cost(n), cost(2*n)
	if large > small+1024 {
		t.Errorf("%d lines: %d bytes allocated, %d lines: %d; want no more than 1 KiB apart", n, small, 2*n, large)
	}
}
