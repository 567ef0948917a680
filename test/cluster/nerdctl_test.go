//go:build cluster && nerdctl

package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// TestNerdctl: kind's nerdctl provider (KIND_EXPERIMENTAL_PROVIDER=nerdctl)
// creates a 1+1 cluster from our image with its own `nerdctl run` flags.
// Every node passes the checks every provider's node must, and nerdctl's
// own; the cluster passes TestOurNodes' checks; then the nodes restart with
// new addresses, and everything is checked again.
func TestNerdctl(t *testing.T) {
	c := createCluster(t, spec{tag: "nd", image: mustEnv(t, envImage), kind: mustEnv(t, envKind), workers: 1,
		engine: "nerdctl", prefix: mustEnv(t, envNerdctlPrefix)})
	c.checkAcrossRestart(t, c.checkNerdctlNodes)
}

// checkNerdctlNodes: per node, what every provider's node must show
// (tier.CheckNode), and how it meets nerdctl's DNS, which has no server:
// step 10 says why it leaves the DNS alone, resolv.conf keeps the
// nameservers nerdctl wrote (the host's) and there is no Docker DNS rule
// (tier.LeavesDNSAlone); the node's own name and every other node's
// resolve to their current addresses (nerdctl's /etc/hosts).
func (c *cluster) checkNerdctlNodes(t *testing.T, stage string) {
	t.Helper()
	for _, name := range c.nodes {
		n := tier.Node{Engine: c.engine, Name: name}
		lines := tier.CheckNode(t, n, c.slow*2*time.Minute)
		tier.LeavesDNSAlone(t, n, lines)
		t.Logf("%s: %s: entrypoint log:\n%s", stage, name, strings.Join(lines, "\n"))
		for _, other := range c.nodes {
			want := c.nodeAddr(t, other, ipv4)
			out, err := n.ExecErr("getent", "ahostsv4", other)
			if f := strings.Fields(out); err != nil || len(f) == 0 || f[0] != want.String() {
				hosts, _ := n.ExecErr("cat", "/etc/hosts")
				t.Errorf("%s: %s: getent ahostsv4 %s: %q, %v; want %s\n/etc/hosts:\n%s", stage, name, other, out, err, want, hosts)
			}
		}
	}
}
