//go:build podman

package podman

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// dnsSearch is the cluster's networking.dnsSearch: kind passes it to every
// node as KIND_DNS_SEARCH, the one thing step 10 still changes in a podman
// node's resolv.conf.
const dnsSearch = "podman.example"

// TestKindCreateCluster: kind v0.23.0 with KIND_EXPERIMENTAL_PROVIDER=podman
// creates a control plane and a worker from our image with its own
// `podman run` flags and waits for our log line. The image has no kubeadm,
// so creation must get through "Preparing nodes" and "Writing
// configuration" and stop only at kubeadm init. Then each node is checked.
func TestKindCreateCluster(t *testing.T) {
	cluster := namePrefix + runID
	// Our own network, not the user's "kind" one (kind creates it, with
	// the same flags as its default network).
	network := namePrefix + runID + "-kind"
	roles := []string{"control-plane", "worker"}
	cfg := filepath.Join(t.TempDir(), "kind.yaml")
	if err := os.WriteFile(cfg, []byte(`kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  dnsSearch: [`+dnsSearch+`]
nodes:
- role: control-plane
- role: worker
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "KIND_EXPERIMENTAL_PROVIDER=podman", "KIND_EXPERIMENTAL_PODMAN_NETWORK="+network)
	t.Cleanup(func() {
		if t.Failed() {
			for _, role := range roles {
				newNode(t, cluster+"-"+role).LogDump()
			}
		}
		del := exec.Command(kindCLI, "delete", "cluster", "--name", cluster)
		del.Env = env
		if out, err := del.CombinedOutput(); err != nil {
			t.Errorf("kind delete cluster: %v\n%s", err, out)
		}
		if _, err := podman(time.Minute, "network", "rm", "-f", network); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	// --retain: keep the nodes after the expected failure, to look at them.
	tier.KindCreateWithoutKubeadm(t, kindCLI, env,
		[]string{"--name", cluster, "--image", nodeImage, "--config", cfg, "--retain", "--wait", "0s"},
		"enabling experimental podman provider",
		// podman words the runtime's error otherwise than Docker, and
		// runc otherwise than crun: exit 127 and podman's own words are
		// kubeadm not found with either runtime.
		"kubeadm init --skip-phases=preflight",
		"failed with error: exit status 127",
		"OCI runtime attempted to invoke a command that was not found")

	nodes := map[string]string{} // name -> IPv4
	for _, role := range roles {
		name := cluster + "-" + role
		nodes[name] = strings.TrimSpace(mustPodman(t, "inspect", "-f", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}", name))
	}
	ids := map[string]string{}
	for _, role := range roles {
		n := newNode(t, cluster+"-"+role)
		t.Run(role, func(t *testing.T) {
			n.T = t
			checkNode(t, n, network, nodes)
			if _, err := n.ExecErr("test", "-s", "/kind/kubeadm.conf"); err != nil {
				t.Errorf("kind wrote no /kind/kubeadm.conf: %v", err)
			}
			id := n.MustExec("cat", "/etc/machine-id")
			if other, dup := ids[id]; dup {
				t.Errorf("%s and %s share machine-id %q", other, n.Name, strings.TrimSpace(id))
			}
			ids[id] = n.Name
		})
	}
}

// checkNode asserts what every podman node must show: what every node of
// every provider must (tier.CheckNode: systemd running with no failed
// unit, the line kind waits for and no ERROR: line in its log, no `fail`
// row from `entrypoint check`), DNS left as podman set it up (tier.
// LeavesDNSAlone) but for KIND_DNS_SEARCH, and working. nodes are the
// cluster's nodes (name -> IPv4): each must resolve through podman's DNS.
func checkNode(t *testing.T, n *node, network string, nodes map[string]string) {
	t.Helper()
	lines := tier.CheckNode(t, n.Node, bootLimit)
	resolv := tier.LeavesDNSAlone(t, n.Node, lines)

	// resolv.conf: podman's DNS server (aardvark-dns at the network's
	// gateways) among the nameservers; only the search line is kind's.
	servers := tier.ResolvLines(resolv, "nameserver")
	for _, gw := range gateways(t, network) {
		if !slices.Contains(servers, "nameserver "+gw) {
			t.Errorf("resolv.conf does not name podman's DNS server %s (the network's gateway):\n%s", gw, resolv)
		}
	}
	if got := tier.ResolvLines(resolv, "search"); !slices.Equal(got, []string{"search " + dnsSearch}) {
		t.Errorf("search lines %q, want only %q (KIND_DNS_SEARCH)", got, "search "+dnsSearch)
	}
	// The names of the other nodes are in no /etc/hosts of this one: only
	// podman's DNS answers them.
	for name, ip := range nodes {
		out, err := n.ExecErr("getent", "ahostsv4", name)
		if f := strings.Fields(out); err != nil || len(f) == 0 || f[0] != ip {
			t.Errorf("getent ahostsv4 %s: %q, %v; want %s", name, out, err, ip)
		}
	}
}
