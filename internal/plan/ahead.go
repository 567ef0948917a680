package plan

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Ahead starts a step's command before the step's turn, and lets the
// step's Apply take that run's result instead of running it again.
//
// It exists for enable_network_magic's iptables-restore. Most of that
// restore's time is the kernel's, not ours: a restore that deletes rules
// (Docker's DNS rules are replaced) leaves the rules to free after an RCU
// grace period, and closing its netfilter socket waits for that, about
// 10 ms. The restore's input is known as soon as the prefetched probes
// answer, and nothing steps 1–9 do can change it or observe the rules, so
// started early that wait runs while they work.
//
// The step still plans and applies as always: Apply's Run of the same
// argv and stdin joins the early run (its output and error are the step's,
// reported at the step's turn); an early run that no Run claims was still
// a command the step's own planning chose, from the same answers, and a
// step that plans a different command runs that one.
type Ahead struct {
	sys      system.System
	deciding sync.WaitGroup // decisions still waiting for their inputs
	running  sync.WaitGroup // decisions and the runs they started

	mu   sync.Mutex
	runs []*aheadRun
}

type aheadRun struct {
	argv    []string
	stdin   []byte
	claimed bool
	done    chan struct{}
	out     []byte
	errOut  []byte
	err     error
}

// NewAhead returns an Ahead running commands through sys.
func NewAhead(sys system.System) *Ahead { return &Ahead{sys: sys} }

// Go calls decide in the background (it may wait for probes) and, when it
// returns a Run action, starts that command; ctx bounds the run.
func (a *Ahead) Go(ctx context.Context, decide func() (Action, bool)) {
	a.deciding.Add(1)
	a.running.Add(1)
	go func() {
		defer a.running.Done()
		act, ok := decide()
		if !ok || act.Op != OpRun {
			a.deciding.Done()
			return
		}
		x := act.Extras()
		r := &aheadRun{argv: x.Argv, stdin: x.Stdin, done: make(chan struct{})}
		a.mu.Lock()
		a.runs = append(a.runs, r)
		a.mu.Unlock()
		a.deciding.Done()
		r.out, r.errOut, r.err = a.sys.Run(ctx, x.Argv, x.Stdin, x.Timeout)
		close(r.done)
	}()
}

// Wait waits for every decision and run to end (cancel their context
// first to end them early).
func (a *Ahead) Wait() { a.running.Wait() }

// System is sys whose Run joins a started run of the same argv and stdin
// that no Run has claimed yet, and runs anything else itself.
func (a *Ahead) System() system.System { return aheadSystem{a.sys, a} }

type aheadSystem struct {
	system.System
	a *Ahead
}

func (s aheadSystem) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, []byte, error) {
	// A decision still in progress may be about to start this very
	// command: running it here too would run it twice.
	s.a.deciding.Wait()
	if r := s.a.claim(argv, stdin); r != nil {
		select {
		case <-r.done:
			return r.out, r.errOut, r.err
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	return s.System.Run(ctx, argv, stdin, timeout)
}

func (a *Ahead) claim(argv []string, stdin []byte) *aheadRun {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.runs {
		if !r.claimed && slices.Equal(r.argv, argv) && bytes.Equal(r.stdin, stdin) {
			r.claimed = true
			return r
		}
	}
	return nil
}

// Unclaimed lists the argv of the runs started that no Run has claimed (a
// step before theirs failed, or their step planned otherwise).
func (a *Ahead) Unclaimed() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out [][]string
	for _, r := range a.runs {
		if !r.claimed {
			out = append(out, r.argv)
		}
	}
	return out
}
