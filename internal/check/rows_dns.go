package check

// This file holds the row of the DNS forwarder that IPv6-only pods use
// (enable_network_magic, magic_forwarder.go): whether the node needs it,
// and on a booted node that does, one query through it.

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/network"
)

const dnsForwarderRow = "dns-forwarder"

func (c *checker) dnsForwarder(ctx context.Context, probe func(context.Context, netip.AddrPort, string) (time.Duration, error)) Row {
	f, hint, err := c.magicFacts()
	if err != nil {
		return Row{dnsForwarderRow, Fail, err.Error(), hint}
	}
	v6, why := f.ForwarderAddr()
	// Whether step 10 runs the forwarder, whether or not its unit is
	// there already (a booted node's plan writes none).
	planned := slices.ContainsFunc(c.results, func(r boot.Result) bool { return network.ForwarderPlanned(r.Actions) })
	if !planned {
		return Row{dnsForwarderRow, Pass,
			"not needed: " + cmp.Or(why, "pods do not reach Docker's DNS through the host IP here (see host-docker-internal)"), ""}
	}
	server := netip.AddrPortFrom(v6, 53)
	runs := fmt.Sprintf("%s runs it at %s", network.ForwarderUnitName, server)
	switch {
	case !c.live:
		return Row{dnsForwarderRow, Pass, runs + " (a replay: not queried)", ""}
	case !c.booted:
		return Row{dnsForwarderRow, Pass, runs + " once the node boots (not queried: systemd is not running)", ""}
	case probe == nil:
		return Row{dnsForwarderRow, Pass, runs + " (not queried)", ""}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	took, err := probe(ctx, server, f.Hostname)
	if err != nil {
		return Row{dnsForwarderRow, Fail, fmt.Sprintf("%s: a query for %s's AAAA records: %v", runs, f.Hostname, err),
			"IPv6-only pods cannot resolve names Docker's DNS knows: see systemctl status " + network.ForwarderUnitName + " and journalctl -u " + network.ForwarderUnitName}
	}
	return Row{dnsForwarderRow, Pass, fmt.Sprintf("%s: answered in %s", runs, took.Round(time.Microsecond)), ""}
}
