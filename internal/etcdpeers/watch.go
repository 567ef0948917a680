package etcdpeers

// This file holds Watch: etcd-peer-nat's rounds, until every peer is
// settled or its time is up.

import (
	"context"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Rounds bound a run: peers start when their containers do, which after
// `docker restart` of a cluster is within seconds, and after a node
// started by hand may be minutes; ten minutes of rounds two seconds
// apart (each lookup at most LookupTimeout) covers both and ends.
type Rounds struct {
	Max      int
	Interval time.Duration
}

// DefaultRounds are the production bounds (a function: no package state).
func DefaultRounds() Rounds { return Rounds{Max: 300, Interval: 2 * time.Second} }

// Watch maps cfg's peers: each round looks up the pending ones and
// installs the rules of what it found, until every peer is settled or
// r.Max rounds have run. It fails only when no round could install its
// rules.
func Watch(ctx context.Context, sys system.System, log *logline.Logger, cfg Config, r Rounds) error {
	w, logs := NewWatcher(sys, cfg)
	log.Info("mapping etcd's peers of " + cfg.Self + " to their current addresses")
	if err := plan.Apply(ctx, sys, log, logs, false); err != nil {
		return err
	}
	w.ProbeJumps(ctx)
	var lastErr error
	for round := 0; round < r.Max && (!w.Done() || lastErr != nil); round++ {
		if round > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.Interval):
			}
		}
		if err := plan.Apply(ctx, sys, log, w.Round(ctx), false); err != nil {
			// Left as not installed: the next round that finds
			// anything writes the whole chain again.
			log.Warn("installing etcd peer redirects: " + err.Error())
			lastErr = err
			continue
		}
		w.Installed()
		lastErr = nil
	}
	for _, u := range w.Unresolved() {
		log.Warn("etcd peer never resolved, left alone: " + u)
	}
	log.Info("etcd peer redirects: " + describe(w.Mappings))
	return lastErr
}

func describe(ms []Mapping) string {
	if len(ms) == 0 {
		return "none needed"
	}
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += ", "
		}
		s += m.Name + " " + m.From.String() + " -> " + m.To.String()
	}
	return s
}
