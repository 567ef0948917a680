//go:build podman

package podman

import (
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// startNode runs a node with kind's podman flags (tier.KindRunArgs), but
// the cgroup namespace given, and removes it (with its volume) when the
// test ends.
func startNode(t *testing.T, network, suffix, cgroupns string) *node {
	t.Helper()
	name := namePrefix + runID + "-" + suffix
	volume := strings.TrimSpace(mustPodman(t, "volume", "create", "--label", name+"=true"))
	// Removed after the node (cleanups run last first).
	t.Cleanup(func() {
		if _, err := podman(time.Minute, "volume", "rm", "--force", volume); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	args := tier.KindRunArgs("podman", tier.KindNode{Name: name, Network: network, Cgroupns: cgroupns, Cluster: namePrefix + runID, Volume: volume})
	return &node{tier.RunNode(t, "podman", name, append(args, nodeImage)...)}
}

// TestNoCgroupns: kind's podman flags with --cgroupns=host, as kinds before
// v0.20 ran podman nodes. On cgroup v1 with podman's cgroupfs manager the
// node's cgroups are /libpod_parent/libpod-<id> (Docker: /docker/<id>), and
// the hierarchies are mounted with that root: fix_cgroup must bind each
// mount at its full path and make the kubelet roots there.
func TestNoCgroupns(t *testing.T) {
	if tier.CgroupV2() {
		t.Fatal("this test needs a cgroup v1 (hybrid) host: --cgroupns=host on v2 is another path")
	}
	n := startNode(t, newNetwork(t, "hostcgns"), "hostcgns", "host")
	n.WaitRunning(bootLimit)
	tier.NoFailedUnits(t, n.Node)
	own := n.MustExec("cat", "/proc/1/cgroup")
	if !strings.Contains(own, ":/libpod_parent/libpod-") {
		t.Fatalf("the node's cgroups are not podman's /libpod_parent/libpod-<id>:\n%s", own)
	}
	log := n.MustLog()
	tier.RequireLines(t, "podman logs", log,
		"WARN: cgroupns not enabled! Please use cgroup v2, or cgroup v1 with cgroupns enabled.",
		"INFO: detected cgroup v1",
		"INFO: fixing cgroup mounts for all subsystems",
	)
	if strings.Contains(log, "ERROR: ") {
		t.Errorf("ERROR: in the log:\n%s", log)
	}

	// Every v1 hierarchy the host mounts (and runc mirrors into the node)
	// has /kubelet and /kubelet.slice mounted in the node.
	tier.CheckKubeletRoots(t, n.Mounts())
}
