package boot

import (
	"context"
	"io"
	"io/fs"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/containerd"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// configGate holds configure_containerd's first read of its config
// (step 2) until open is closed, or a second has passed; opened says
// which. then, if set, runs once the wait is over.
type configGate struct {
	open   chan struct{}
	then   func()
	once   sync.Once
	opened bool
}

func (g *configGate) hold(p string) {
	if p != containerd.ConfigPath {
		return
	}
	g.once.Do(func() {
		select {
		case <-g.open:
			g.opened = true
		case <-time.After(time.Second):
		}
		if g.then != nil {
			g.then()
		}
	})
}

// inFlight is a Tree that holds every iptables-save and name lookup until
// released, and holds configure_containerd's read of its config until
// want of those probes have started (or a second has passed).
type inFlight struct {
	*system.Tree
	configGate
	want int

	mu      sync.Mutex
	started int
	release chan struct{}
	seen    int // probes started when the config was read
}

func newInFlight(tree *system.Tree, want int) *inFlight {
	f := &inFlight{Tree: tree, want: want, release: make(chan struct{})}
	f.open = make(chan struct{})
	f.then = func() {
		f.mu.Lock()
		f.seen = f.started
		f.mu.Unlock()
		close(f.release)
	}
	return f
}

func (f *inFlight) probe(ctx context.Context) {
	f.mu.Lock()
	f.started++
	if f.started == f.want {
		close(f.open)
	}
	f.mu.Unlock()
	select {
	case <-f.release:
	case <-ctx.Done():
	}
}

func (f *inFlight) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, []byte, error) {
	if strings.HasSuffix(argv[0], "-save") {
		f.probe(ctx)
	}
	return f.Tree.Run(ctx, argv, stdin, timeout)
}

func (f *inFlight) LookupIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	f.probe(ctx)
	return f.Tree.LookupIP(ctx, network, host)
}

func (f *inFlight) Stat(p string) (fs.FileInfo, error) {
	f.hold(p)
	return f.Tree.Stat(p)
}

// runOrDryRun detects the host of tree through sys, and runs or dry-runs
// every step there; a fatal step fails the test.
func runOrDryRun(t *testing.T, tree *system.Tree, sys system.System, dry bool) *Host {
	t.Helper()
	env, _ := tree.Environ()
	h, err := Detect(sys, env)
	if err != nil {
		t.Fatal(err)
	}
	h.Rand, h.ProbeTimeout = fixedRand(), 5*time.Second
	if dry {
		_, err = DryRun(t.Context(), h, Steps())
	} else {
		err = Run(t.Context(), h, Steps(), logline.New(io.Discard, logline.Text))
	}
	if err != nil {
		t.Fatalf("dry run %t: %v", dry, err)
	}
	return h
}

// TestProbesRunDuringEarlierSteps: steps 9 and 10's slow probes (four
// iptables-saves, three lookups) are in flight while step 2 plans, in a
// real run and in a dry run, and the run still ends as it does without
// that overlap.
func TestProbesRunDuringEarlierSteps(t *testing.T) {
	for _, dry := range []bool{false, true} {
		tree := copyRoot(t, scenario{"net-ip-change", hostsDir + "/net-ip-change"})
		sys := newInFlight(tree, 7)
		runOrDryRun(t, tree, sys, dry)
		if !sys.opened {
			t.Errorf("dry run %t: %d of 7 probes had started when configure_containerd read its config", dry, sys.seen)
		}
	}
}

// restoreFirst is a Tree that, with hold, holds configure_containerd's
// read of its config until an iptables-restore has started (or a second
// has passed). It counts the restores and the reads of /proc/net/route.
type restoreFirst struct {
	*system.Tree
	configGate
	hold bool
	once sync.Once

	mu         sync.Mutex
	restores   int
	routeReads int
}

func (f *restoreFirst) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, []byte, error) {
	if strings.HasSuffix(argv[0], "-restore") {
		f.mu.Lock()
		f.restores++
		f.mu.Unlock()
		f.once.Do(func() { close(f.open) })
	}
	return f.Tree.Run(ctx, argv, stdin, timeout)
}

func (f *restoreFirst) ReadFile(p string, limit int) ([]byte, error) {
	if p == network.ProcNetRoute {
		f.mu.Lock()
		f.routeReads++
		f.mu.Unlock()
	}
	return f.Tree.ReadFile(p, system.LimitTable)
}

func (f *restoreFirst) Stat(p string) (fs.FileInfo, error) {
	if f.hold {
		f.configGate.hold(p)
	}
	return f.Tree.Stat(p)
}

// TestDNSRestoreRunsAhead: a real run starts enable_network_magic's
// iptables-restore while step 2 plans, runs it once, and changes the same
// files and logs the same lines as without that head start (TestHosts has
// the golden files); a dry run never starts it.
func TestDNSRestoreRunsAhead(t *testing.T) {
	for _, dry := range []bool{false, true} {
		tree := copyRoot(t, scenario{"net-ip-change", hostsDir + "/net-ip-change"})
		sys := &restoreFirst{Tree: tree, hold: !dry}
		sys.open = make(chan struct{})
		h := runOrDryRun(t, tree, sys, dry)
		want := 1
		if dry {
			want = 0
		}
		if sys.restores != want {
			t.Errorf("dry run %t: %d restores, want %d", dry, sys.restores, want)
		}
		if !dry && !sys.opened {
			t.Errorf("no restore had started when configure_containerd read its config")
		}
		// enable_network_magic reads its facts once, for the head start
		// and for itself.
		if sys.routeReads != 1 {
			t.Errorf("dry run %t: %s read %d times, want once", dry, network.ProcNetRoute, sys.routeReads)
		}
		if !dry && h.ahead != nil && len(h.ahead.Unclaimed()) > 0 {
			t.Errorf("enable_network_magic did not take the restore started ahead: %q", h.ahead.Unclaimed())
		}
	}
}
