//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// kindBinary returns kind's CLI, which run.sh built (test/kind-cli.sh).
func kindBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("E2E_KIND_CLI")
	if bin == "" {
		t.Fatal("E2E_KIND_CLI is not set: run test/e2e/run.sh (make e2e)")
	}
	return bin
}

// TestKindCreateCluster: the real kind CLI starts our nodes with its own
// flags and waits for our log line. The image ships no kubeadm, so creation
// must get through "Preparing nodes" and "Writing configuration" and stop
// only at kubeadm init.
//
// Not parallel: kind waits 30s for a log line of each node (see
// node.logs).
func TestKindCreateCluster(t *testing.T) {
	kind := kindBinary(t)
	cluster := namePrefix + runID
	netName := namePrefix + runID + "-kind"
	cfg := filepath.Join(t.TempDir(), "kind.yaml")
	if err := os.WriteFile(cfg, []byte(`kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
- role: worker
- role: worker
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		// our own network, not the user's "kind" one
		"KIND_EXPERIMENTAL_DOCKER_NETWORK="+netName,
	)
	t.Cleanup(func() {
		if t.Failed() {
			for _, role := range []string{"control-plane", "worker", "worker2"} {
				(&node{TestNode: tier.NewTestNode(t, "docker", cluster+"-"+role)}).LogDump()
			}
		}
		del := exec.Command(kind, "delete", "cluster", "--name", cluster)
		del.Env = env
		if out, err := del.CombinedOutput(); err != nil {
			t.Errorf("kind delete cluster: %v\n%s", err, out)
		}
		if _, err := dockerCmd(time.Minute, "network", "rm", netName); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	// --retain: keep the nodes after the expected failure, to look at them.
	tier.KindCreateWithoutKubeadm(t, kind, env,
		[]string{"--name", cluster, "--image", nodeImage, "--config", cfg, "--retain", "--wait", "0s"},
		`"kubeadm": executable file not found`)

	// The nodes kind started ("Preparing nodes" passed, so kind saw our log
	// line in each): systemd is up, each has its own identity, and kind
	// wrote its kubeadm config into each.
	net := &network{Name: netName}
	ids := map[string]string{}
	for _, role := range []string{"control-plane", "worker", "worker2"} {
		n := &node{TestNode: tier.NewTestNode(t, "docker", cluster+"-"+role), Network: net}
		n.WaitRunning(bootLimit)
		if _, err := n.ExecErr("test", "-s", "/kind/kubeadm.conf"); err != nil {
			t.Errorf("%s: kind wrote no /kind/kubeadm.conf: %v", n.Name, err)
		}
		id := n.readFile("/etc/machine-id")
		if other, dup := ids[id]; dup {
			t.Errorf("%s and %s share machine-id %q", other, n.Name, strings.TrimSpace(id))
		}
		ids[id] = n.Name
	}
}
