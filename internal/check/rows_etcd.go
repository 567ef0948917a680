package check

// This file holds the row about an HA control plane's etcd peers
// (kind#1689): shown only where etcd's data directory exists.

import (
	"fmt"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
)

// etcdPeers is the row of the membership step 10 reads, none on a node
// without etcd data (a worker, a control plane before kubeadm).
func (c *checker) etcdPeers() []Row {
	f, err := c.st.Peers.Get()
	if err != nil || !f.Present {
		return nil
	}
	const name = "etcd-peers"
	if f.Err != nil {
		return []Row{{name, Warn, "membership unreadable: " + f.Err.Error(),
			"after a restart with new addresses, this control plane's etcd will dial its peers at the old ones; while etcd runs its file changes under the reader, so check it before the node boots (entrypoint --dry-run)"}}
	}
	var names []string
	for _, mb := range f.Members {
		names = append(names, mb.Name)
	}
	obs := fmt.Sprintf("%d members (%s)", len(f.Members), strings.Join(names, ", "))
	// What the plan makes of the membership (the backend does not matter
	// here): the row says what the plan does.
	cfg, notes := etcdpeers.Redirect(f, "")
	var left []string
	for _, a := range notes {
		left = append(left, string(a.Data))
	}
	why := joinClipped(left, "; ")
	switch {
	case len(f.Members) < 2:
		return []Row{{name, Pass, obs + ": a single member dials no peer", ""}}
	case len(cfg.Peers) == 0:
		return []Row{{name, Warn, obs + ": " + why,
			"after a restart with new addresses, this control plane's etcd will dial its peers at the old ones: the entrypoint redirects them only when a member is named as this node is (its hostname) and the others have names a resolver can look up"}}
	case c.booted && f.Installed.Unit == nil:
		return []Row{{name, Warn, obs + ": " + etcdpeers.UnitPath + " is missing",
			"the entrypoint installs it at every boot of an HA control plane; without it, a restart that moves the peers' addresses leaves etcd without a leader (journalctl -u " + etcdpeers.UnitName + ")"}}
	}
	obs += ": " + etcdpeers.UnitName + " redirects the peers' recorded addresses to their current ones"
	if why != "" {
		obs += "; " + why
	}
	return []Row{{name, Pass, obs, ""}}
}
