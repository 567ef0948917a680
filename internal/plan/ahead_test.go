package plan

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// countingSys runs every command by answering "ran <argv> <stdin>" after
// holding it until release is closed, and counts the runs.
type countingSys struct {
	system.System // nil: only Run is used
	release       chan struct{}

	mu   sync.Mutex
	runs []string
}

func (c *countingSys) Run(ctx context.Context, argv []string, stdin []byte, _ time.Duration) ([]byte, []byte, error) {
	run := strings.Join(argv, " ") + " <" + string(stdin)
	c.mu.Lock()
	c.runs = append(c.runs, run)
	c.mu.Unlock()
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if argv[0] == "fails" {
		return nil, nil, errors.New("fails: exit status 1")
	}
	return []byte("ran " + run), nil, nil
}

func (c *countingSys) ran() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.runs)
}

func newCounting() *countingSys { return &countingSys{release: make(chan struct{})} }

// waitRuns waits until sys has started n runs.
func waitRuns(t *testing.T, sys *countingSys, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(sys.ran()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs started, want %d: %q", len(sys.ran()), n, sys.ran())
		}
		time.Sleep(time.Millisecond)
	}
}

func decided(a Action) func() (Action, bool) { return func() (Action, bool) { return a, true } }

func TestAheadRunJoinsTheStartedRun(t *testing.T) {
	for _, fail := range []bool{false, true} {
		sys := newCounting()
		ahead := NewAhead(sys)
		cmd := "restore"
		if fail {
			cmd = "fails"
		}
		ahead.Go(t.Context(), decided(Run([]string{cmd}, []byte("rules"), time.Second)))
		waitRuns(t, sys, 1) // started before anyone asked for it
		close(sys.release)
		out, _, err := ahead.System().Run(t.Context(), []string{cmd}, []byte("rules"), time.Second)
		ahead.Wait()
		if fail {
			if err == nil || err.Error() != "fails: exit status 1" {
				t.Errorf("joined a failed run: got %q, %v; want its error", out, err)
			}
		} else if string(out) != "ran restore <rules" || err != nil {
			t.Errorf("joined run: got %q, %v", out, err)
		}
		if got := sys.ran(); len(got) != 1 {
			t.Errorf("ran %q, want the command once", got)
		}
	}
}

func TestAheadRunsWhatItDidNotStart(t *testing.T) {
	sys := newCounting()
	close(sys.release)
	ahead := NewAhead(sys)
	ahead.Go(t.Context(), decided(Run([]string{"restore"}, []byte("rules"), time.Second)))
	ahead.Go(t.Context(), func() (Action, bool) { return Action{}, false })
	// The order below is the started run's only once it has started: on a
	// slow host (arm64 under qemu-user) the test's own runs came first.
	waitRuns(t, sys, 1)
	s := ahead.System()
	// Another input, another command: each runs itself.
	for _, c := range []struct{ argv, stdin string }{{"restore", "other rules"}, {"other", "rules"}} {
		if out, _, err := s.Run(t.Context(), []string{c.argv}, []byte(c.stdin), time.Second); err != nil || string(out) != "ran "+c.argv+" <"+c.stdin {
			t.Errorf("run %s <%s: got %q, %v", c.argv, c.stdin, out, err)
		}
	}
	// The started run is claimed once; a second identical Run runs again.
	for range 2 {
		if _, _, err := s.Run(t.Context(), []string{"restore"}, []byte("rules"), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ahead.Wait()
	want := []string{"restore <rules", "restore <other rules", "other <rules", "restore <rules"}
	if got := sys.ran(); !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}
}

// TestAheadRunWaitsForADecision: a Run asked for while a decision is
// still waiting for its inputs must not run the command itself, or it
// would run twice.
func TestAheadRunWaitsForADecision(t *testing.T) {
	sys := newCounting()
	close(sys.release)
	ahead := NewAhead(sys)
	inputs := make(chan struct{})
	ahead.Go(t.Context(), func() (Action, bool) {
		<-inputs
		return Run([]string{"restore"}, []byte("rules"), time.Second), true
	})
	done := make(chan error)
	go func() {
		_, _, err := ahead.System().Run(t.Context(), []string{"restore"}, []byte("rules"), time.Second)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) before the decision was made", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(inputs)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ahead.Wait()
	if got := sys.ran(); len(got) != 1 {
		t.Errorf("ran %q, want the command once", got)
	}
}

// TestAheadStopsWithItsContext: a run started ahead that no step claims
// (an earlier step failed) ends when its context does, and Wait returns.
func TestAheadStopsWithItsContext(t *testing.T) {
	sys := newCounting() // never released
	ctx, cancel := context.WithCancel(t.Context())
	ahead := NewAhead(sys)
	ahead.Go(ctx, decided(Run([]string{"restore"}, nil, time.Minute)))
	waitRuns(t, sys, 1)
	cancel()
	done := make(chan struct{})
	go func() { ahead.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after its context was cancelled")
	}
}
