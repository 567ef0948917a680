package companion

// This file holds etcd-peer-nat, the command of the runtime unit that
// enable_network_magic installs on an HA control plane (kind#1689).

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// etcdPeerNATOnce is the dry run of etcd-peer-nat: one round, which shows
// the membership it maps, what each name resolves to now, and the rules
// it would install.
func etcdPeerNATOnce(ctx context.Context, h *boot.Host, _ io.Reader) ([]boot.Fact, []plan.Action, error) {
	cfg, err := etcdpeers.ReadConfig(h.Sys)
	if err != nil {
		return nil, nil, err
	}
	facts := []boot.Fact{{Name: "iptables", Value: cfg.Iptables}, {Name: "this node", Value: cfg.Self}}
	for _, p := range cfg.Peers {
		facts = append(facts, boot.Fact{Name: "peer " + p.Name, Value: strings.Join(p.PeerURLs, ",")})
	}
	w, actions := etcdpeers.NewWatcher(h.Sys, cfg)
	w.ProbeJumps(ctx)
	actions = append(actions, w.Round(ctx).Actions()...)
	for _, u := range w.Unresolved() {
		actions = append(actions, plan.Info("etcd peer not resolved yet: "+u))
	}
	return facts, actions, nil
}

// etcdPeerNAT is the command's run, for as long as the node runs
// (etcdpeers.Watch).
func etcdPeerNAT(ctx context.Context, sys system.System, log *logline.Logger) error {
	cfg, err := etcdpeers.ReadConfig(sys)
	if err != nil {
		return err
	}
	if err := etcdpeers.Watch(ctx, sys, log.Step(etcdpeers.Command), cfg, etcdpeers.DefaultRounds()); err != nil {
		return fmt.Errorf("%s: %w", etcdpeers.Command, err)
	}
	return nil
}
