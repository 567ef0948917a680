//go:build podman

package podman

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// dnsSearch is the cluster's networking.dnsSearch: kind passes it to every
// node as KIND_DNS_SEARCH, the one thing step 10 still changes in a podman
// node's resolv.conf.
const dnsSearch = "podman.example"

// noDockerDNS starts the line enable_network_magic logs when a node has
// no trace of Docker's embedded DNS (internal/network, noEmbeddedDNS).
const noDockerDNS = "INFO: no nameserver 127.0.0.11 in /etc/resolv.conf and no "

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

// checkNode asserts what every podman node must show: systemd running with
// no failed unit, the line kind waits for and no ERROR: line in its log,
// DNS left as podman set it up (but for KIND_DNS_SEARCH) and working, and
// no `fail` row from `entrypoint check`. nodes are the cluster's nodes
// (name -> IPv4): each must resolve through podman's DNS.
func checkNode(t *testing.T, n *node, network string, nodes map[string]string) {
	t.Helper()
	n.WaitRunning(bootLimit)
	if failed := n.failedUnits(); failed != "" {
		t.Errorf("failed units:\n%s", failed)
	}

	log := n.MustLog()
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "INFO: ") || strings.HasPrefix(l, "WARN: ") || strings.HasPrefix(l, "ERROR: ") {
			lines = append(lines, l)
		}
		if strings.HasPrefix(l, "ERROR: ") {
			t.Errorf("log: %s", l)
		}
	}
	if !kindWaitRe.MatchString(log) {
		t.Errorf("the log never matches kind's %q:\n%s", kindWaitRe, log)
	}
	version := "INFO: detected cgroup v1"
	if tier.CgroupV2() {
		version = "INFO: detected cgroup v2"
	}
	if !slices.Contains(lines, version) {
		t.Errorf("no line %q in:\n%s", version, strings.Join(lines, "\n"))
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, noDockerDNS) }) {
		t.Errorf("enable_network_magic does not say why it leaves podman's DNS alone (%q...):\n%s", noDockerDNS, strings.Join(lines, "\n"))
	}

	// resolv.conf: podman's nameservers (aardvark-dns at the network's
	// gateways first), untouched; only the search line is kind's.
	resolv, orig := n.MustExec("cat", "/etc/resolv.conf"), n.MustExec("cat", "/etc/resolv.conf.original")
	if diff := cmp.Diff(resolvLines(orig, "nameserver"), resolvLines(resolv, "nameserver")); diff != "" {
		t.Errorf("nameservers changed (-podman's +now):\n%s", diff)
	}
	servers := resolvLines(resolv, "nameserver")
	for _, gw := range gateways(t, network) {
		if !slices.Contains(servers, "nameserver "+gw) {
			t.Errorf("resolv.conf does not name podman's DNS server %s (the network's gateway):\n%s", gw, resolv)
		}
	}
	if got := resolvLines(resolv, "search"); !slices.Equal(got, []string{"search " + dnsSearch}) {
		t.Errorf("search lines %q, want only %q (KIND_DNS_SEARCH)", got, "search "+dnsSearch)
	}
	if strings.Contains(resolv, "127.0.0.11") {
		t.Errorf("resolv.conf names Docker's embedded DNS:\n%s", resolv)
	}
	if rules := n.MustExec("iptables-save", "-t", "nat"); strings.Contains(rules, "127.0.0.11") || strings.Contains(rules, "DOCKER_OUTPUT") {
		t.Errorf("Docker DNS rules in a podman node:\n%s", rules)
	}
	// The names of the other nodes are in no /etc/hosts of this one: only
	// podman's DNS answers them.
	for name, ip := range nodes {
		out, err := n.ExecErr("getent", "ahostsv4", name)
		if f := strings.Fields(out); err != nil || len(f) == 0 || f[0] != ip {
			t.Errorf("getent ahostsv4 %s: %q, %v; want %s", name, out, err, ip)
		}
	}

	// entrypoint check: no fail row (it exits 1 on a warn).
	out, _ := n.ExecErr("/usr/local/bin/entrypoint", "check", "--json")
	var rows []struct{ Name, Status, Observed, Hint string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) == 0 {
		t.Fatalf("entrypoint check --json: %v\n%s", err, out)
	}
	for _, r := range rows {
		switch r.Status {
		case "fail":
			t.Errorf("check row %s fails: %s (%s)", r.Name, r.Observed, r.Hint)
		case "warn":
			t.Logf("check row %s warns: %s", r.Name, r.Observed)
		}
	}
}

// resolvLines returns the lines of resolv.conf that start with the keyword,
// blanks collapsed.
func resolvLines(resolv, keyword string) []string {
	var out []string
	for _, l := range strings.Split(resolv, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == keyword {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}
