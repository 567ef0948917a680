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
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// inFlight is a Tree that holds every iptables-save and name lookup until
// released, and holds configure_containerd's read of its config until
// want of those probes have started (or a second has passed).
type inFlight struct {
	*system.Tree
	want int

	mu       sync.Mutex
	started  int
	all      chan struct{}
	release  chan struct{}
	sawAll   bool
	seen     int // probes started when the config was read
	waitedOn bool
}

func (f *inFlight) probe(ctx context.Context) {
	f.mu.Lock()
	f.started++
	if f.started == f.want {
		close(f.all)
	}
	f.mu.Unlock()
	select {
	case <-f.release:
	case <-ctx.Done():
	}
}

func (f *inFlight) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, error) {
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
	if p == containerd.ConfigPath {
		f.mu.Lock()
		first := !f.waitedOn
		f.waitedOn = true
		f.mu.Unlock()
		if first {
			select {
			case <-f.all:
				f.sawAll = true
			case <-time.After(time.Second):
			}
			f.mu.Lock()
			f.seen = f.started
			f.mu.Unlock()
			close(f.release)
		}
	}
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
		sys := &inFlight{Tree: tree, want: 7, all: make(chan struct{}), release: make(chan struct{})}
		runOrDryRun(t, tree, sys, dry)
		if !sys.sawAll {
			t.Errorf("dry run %t: %d of 7 probes had started when configure_containerd read its config", dry, sys.seen)
		}
	}
}

// restoreFirst is a Tree that, with hold, holds configure_containerd's
// read of its config until an iptables-restore has started (or a second
// has passed).
type restoreFirst struct {
	*system.Tree
	hold    bool
	started chan struct{}
	once    sync.Once

	mu       sync.Mutex
	restores int
	early    bool // a restore had started when the config was read
	held     bool
}

func (f *restoreFirst) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, error) {
	if strings.HasSuffix(argv[0], "-restore") {
		f.mu.Lock()
		f.restores++
		f.mu.Unlock()
		f.once.Do(func() { close(f.started) })
	}
	return f.Tree.Run(ctx, argv, stdin, timeout)
}

func (f *restoreFirst) Stat(p string) (fs.FileInfo, error) {
	if p == containerd.ConfigPath && f.hold {
		f.mu.Lock()
		first := !f.held
		f.held = true
		f.mu.Unlock()
		if first {
			select {
			case <-f.started:
				f.early = true
			case <-time.After(time.Second):
			}
		}
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
		sys := &restoreFirst{Tree: tree, hold: !dry, started: make(chan struct{})}
		h := runOrDryRun(t, tree, sys, dry)
		want := 1
		if dry {
			want = 0
		}
		if sys.restores != want {
			t.Errorf("dry run %t: %d restores, want %d", dry, sys.restores, want)
		}
		if !dry && !sys.early {
			t.Errorf("no restore had started when configure_containerd read its config")
		}
		if !dry && h.ahead != nil && len(h.ahead.Unclaimed()) > 0 {
			t.Errorf("enable_network_magic did not take the restore started ahead: %q", h.ahead.Unclaimed())
		}
	}
}
