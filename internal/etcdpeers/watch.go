package etcdpeers

// This file holds Watch: etcd-peer-nat's rounds, for as long as the node
// runs.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Rounds bound a run. First rounds Interval apart, at most Max, until
// every peer is mapped: peers start when their containers do, which
// after `docker restart` of a cluster is within seconds, and after a
// node started by hand may be minutes. Then, every Follow, one lookup of
// each peer, for as long as the command runs: a control plane restarted
// alone comes back at a new address while the others run (each lookup
// at most LookupTimeout).
type Rounds struct {
	Max      int
	Interval time.Duration
	// Follow is the time between lookups of every peer after the first
	// rounds; 0 ends the run with them.
	Follow time.Duration
	// Wait waits d, or until ctx is done (then ctx's error); nil is a
	// timer. A test gives its own clock.
	Wait func(ctx context.Context, d time.Duration) error
}

// DefaultRounds are the production bounds (a function: no package state).
func DefaultRounds() Rounds {
	return Rounds{Max: 300, Interval: 2 * time.Second, Follow: 5 * time.Second}
}

// Watch maps cfg's peers in the rounds r bounds, each a lookup of every
// peer and the rules of what changed. With no Follow it returns after the
// first rounds, with an error when the last could not install its rules;
// else only ctx's error.
func Watch(ctx context.Context, sys system.System, log *logline.Logger, cfg Config, r Rounds) error {
	wait := r.Wait
	if wait == nil {
		wait = timerWait()
	}
	w, logs := NewWatcher(sys, cfg)
	log.Info("mapping etcd's peers of " + cfg.Self + " to their current addresses")
	if err := plan.Apply(ctx, sys, log, logs, false); err != nil {
		return err
	}
	w.ProbeJumps(ctx)
	var lastErr error
	for round := 0; round < r.Max && !w.Done(); round++ {
		if round > 0 {
			if err := wait(ctx, r.Interval); err != nil {
				return err
			}
		}
		if lastErr = w.apply(ctx, log, w.Round(ctx)); ctx.Err() != nil {
			return ctx.Err()
		}
	}
	unresolved := "etcd peer never resolved, left alone: "
	if r.Follow > 0 {
		unresolved = fmt.Sprintf("etcd peer not resolved yet, looked up again every %s: ", r.Follow)
	}
	for _, u := range w.Unresolved() {
		log.Warn(unresolved + u)
	}
	log.Info("etcd peer redirects: " + describe(w.Mappings()))
	if r.Follow <= 0 {
		return lastErr
	}
	log.Info(fmt.Sprintf("following etcd's peers: each name looked up every %s, a peer that moves redirected anew", r.Follow))
	for {
		if err := wait(ctx, r.Follow); err != nil {
			return err
		}
		if w.apply(ctx, log, w.Round(ctx)); ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// apply applies what a round planned, each family's restore on its own:
// a family whose restore failed is left stale, and the next round
// writes its chain again. A failure is logged when it starts (with what
// the tool printed) and when it ends, not at every round.
func (w *Watcher) apply(ctx context.Context, log *logline.Logger, c Changes) error {
	if err := plan.Apply(ctx, w.sys, log, c.Logs, false); err != nil {
		return err
	}
	var errs []error
	for _, r := range c.Restores {
		f := family(r.V6)
		quiet := log
		if w.failing[f] {
			quiet = nil // a nil Logger discards: said when it started
		}
		if err := plan.Apply(ctx, w.sys, quiet, []plan.Action{r.Action}, false); err != nil {
			if !w.failing[f] {
				log.Warn(fmt.Sprintf("installing etcd peer redirects (%s): %v; tried again every round", tool(r.V6), err))
			}
			w.failing[f] = true
			errs = append(errs, err)
			continue
		}
		w.Installed(r.V6)
		if w.failing[f] {
			log.Info(fmt.Sprintf("etcd peer redirects (%s) installed", tool(r.V6)))
		}
		w.failing[f] = false
	}
	return errors.Join(errs...)
}

// timerWait is Rounds' default Wait: one timer for the whole run, so
// that a wait allocates nothing.
func timerWait() func(context.Context, time.Duration) error {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return func(ctx context.Context, d time.Duration) error {
		t.Reset(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
}

func describe(ms []Mapping) string {
	if len(ms) == 0 {
		return "none needed"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.Name + " " + m.From.String() + " -> " + m.To.String()
	}
	return strings.Join(parts, ", ")
}
