//go:build cluster && nerdctl

package cluster

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// TestNerdctl is the nerdctl tier (test/nerdctl/run.sh, make e2e-nerdctl):
// kind's nerdctl provider (KIND_EXPERIMENTAL_PROVIDER=nerdctl, its own
// `nerdctl run` flags: no --cgroupns, its network "kind" through CNI, no
// embedded DNS) creates 1 control plane + 1 worker from CLUSTER_IMAGE.
// Every node passes the checks of every provider and nerdctl's own; the
// cluster passes TestOurNodes' checks; then the nodes restart with new
// addresses, and everything is checked again.
func TestNerdctl(t *testing.T) {
	c := createCluster(t, spec{tag: "nd", image: mustEnv(t, envImage), kind: mustEnv(t, envKind), worker: true, provider: providerNerdctl})
	c.checkNerdctlNodes(t, "before-restart")
	c.checkAll(t, "before-restart")
	c.restartWithNewIPs(t)
	c.checkNerdctlNodes(t, "after-restart")
	c.checkAll(t, "after-restart")
}

// checkNerdctlNodes: per node, what every provider's node must show
// (tier.CheckNode), and how it meets nerdctl's DNS: step 10 says why it
// leaves the DNS alone; resolv.conf keeps the nameservers nerdctl wrote
// (the host's, from outside the node: compared with resolv.conf.original)
// and no 127.0.0.11; no Docker DNS rule; and the node's own name resolves
// to its current address (nerdctl's /etc/hosts).
func (c *cluster) checkNerdctlNodes(t *testing.T, stage string) {
	t.Helper()
	for _, name := range c.nodes {
		n := tier.Node{Engine: c.cli, Name: name}
		ip := c.nodeIP(t, name)
		lines := tier.CheckNode(t, n, c.slow*2*time.Minute)
		tier.LeavesDNSAlone(t, name, lines)
		t.Logf("%s: %s: entrypoint log:\n%s", stage, name, strings.Join(lines, "\n"))

		resolv, err := n.ExecErr("cat", "/etc/resolv.conf")
		if err != nil {
			t.Fatal(err)
		}
		orig, err := n.ExecErr("cat", "/etc/resolv.conf.original")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := nameservers(resolv), nameservers(orig); !slices.Equal(got, want) || len(got) == 0 {
			t.Errorf("%s: %s: nameservers %v, want nerdctl's %v", stage, name, got, want)
		}
		if strings.Contains(resolv, "127.0.0.11") {
			t.Errorf("%s: %s: resolv.conf names Docker's embedded DNS:\n%s", stage, name, resolv)
		}
		if rules, err := n.ExecErr("iptables-save", "-t", "nat"); err != nil || strings.Contains(rules, "127.0.0.11") || strings.Contains(rules, "DOCKER_OUTPUT") {
			t.Errorf("%s: %s: Docker DNS rules in a nerdctl node (err %v):\n%s", stage, name, err, rules)
		}
		out, err := n.ExecErr("getent", "ahostsv4", name)
		if f := strings.Fields(out); err != nil || len(f) == 0 || f[0] != ip.String() {
			t.Errorf("%s: %s: getent ahostsv4 %s: %q, %v; want %s", stage, name, name, out, err, ip)
		}
		hosts, _ := n.ExecErr("cat", "/etc/hosts")
		t.Logf("%s: %s: /etc/hosts:\n%s", stage, name, hosts)
	}
}

// nameservers are the addresses of resolv.conf's nameserver lines.
func nameservers(resolv string) []string {
	var out []string
	for _, l := range strings.Split(resolv, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "nameserver" {
			if _, err := netip.ParseAddr(f[1]); err == nil {
				out = append(out, f[1])
			}
		}
	}
	return out
}
