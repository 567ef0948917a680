//go:build podman

package podman

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// kindRunArgs are the flags kind v0.23.0's podman provider
// (pkg/cluster/internal/providers/podman/provision.go: commonArgs, then
// runArgsForNode) gives `podman run` for a worker with no proxy, no extra
// mounts or ports, on a filesystem that needs no /dev/mapper, as root (no
// /dev/fuse), in its order. volume is the anonymous /var volume kind
// creates first (createAnonymousVolume).
func kindRunArgs(name, cluster, network, volume, cgroupns string) []string {
	return []string{
		"--name", name,
		"--hostname", name,
		"--label", "io.x-k8s.kind.role=worker",
		"--privileged",
		"--tmpfs", "/tmp",
		"--tmpfs", "/run",
		"--volume", volume + ":/var:suid,exec,dev",
		"--volume", "/lib/modules:/lib/modules:ro",
		"-e", "KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER",
		"--detach",
		"--tty",
		"--net", network,
		"--label", "io.x-k8s.kind.cluster=" + cluster,
		"-e", "container=podman",
		"--cgroupns=" + cgroupns,
	}
}

// startNode runs a node with kind's podman flags, but the cgroup namespace
// given, and removes it (with its volume) when the test ends.
func startNode(t *testing.T, network, suffix, cgroupns string) *node {
	t.Helper()
	name := namePrefix + runID + "-" + suffix
	volume := strings.TrimSpace(mustPodman(t, "volume", "create", "--label", name+"=true"))
	n := newNode(t, name)
	t.Cleanup(func() {
		if t.Failed() {
			n.LogDump()
		}
		if _, err := podman(2*time.Minute, "rm", "--force", "--volumes", name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if _, err := podman(time.Minute, "volume", "rm", "--force", volume); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	mustPodman(t, append(append([]string{"run"}, kindRunArgs(name, namePrefix+runID, network, volume, cgroupns)...), nodeImage)...)
	return n
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
	if failed := n.failedUnits(); failed != "" {
		t.Errorf("failed units:\n%s", failed)
	}
	own := n.MustExec("cat", "/proc/1/cgroup")
	if !strings.Contains(own, ":/libpod_parent/libpod-") {
		t.Fatalf("the node's cgroups are not podman's /libpod_parent/libpod-<id>:\n%s", own)
	}
	log := n.MustLog()
	for _, want := range []string{
		"WARN: cgroupns not enabled! Please use cgroup v2, or cgroup v1 with cgroupns enabled.",
		"INFO: detected cgroup v1",
		"INFO: fixing cgroup mounts for all subsystems",
	} {
		if !slices.Contains(strings.Split(log, "\n"), want) {
			t.Errorf("no line %q in:\n%s", want, log)
		}
	}
	if strings.Contains(log, "ERROR: ") {
		t.Errorf("ERROR: in the log:\n%s", log)
	}

	// Every v1 hierarchy the host mounts (and runc mirrors into the node)
	// has /kubelet and /kubelet.slice mounted in the node.
	host, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	hierarchies := cgroupV1MountPoints(string(host))
	if len(hierarchies) == 0 {
		t.Fatal("the host mounts no cgroup v1 hierarchy under /sys/fs/cgroup")
	}
	inNode := map[string]bool{}
	for _, p := range mountPoints(n.MustExec("cat", "/proc/1/mountinfo")) {
		inNode[p] = true
	}
	for _, h := range hierarchies {
		for _, p := range []string{h, h + "/kubelet", h + "/kubelet.slice"} {
			if !inNode[p] {
				t.Errorf("%s is not mounted in the node", p)
			}
		}
	}
}

// cgroupV1MountPoints returns the mount points of the cgroup v1 hierarchies
// directly under /sys/fs/cgroup in a mountinfo text.
func cgroupV1MountPoints(mountinfo string) []string {
	var out []string
	for _, l := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		f, fs := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(fs) == 0 || fs[0] != "cgroup" {
			continue
		}
		if dir, ok := strings.CutPrefix(f[4], "/sys/fs/cgroup/"); ok && !strings.Contains(dir, "/") {
			out = append(out, f[4])
		}
	}
	return out
}

// mountPoints returns the mount point of every line of a mountinfo text.
func mountPoints(mountinfo string) []string {
	var out []string
	for _, l := range strings.Split(mountinfo, "\n") {
		if f := strings.Fields(l); len(f) >= 5 {
			out = append(out, f[4])
		}
	}
	return out
}
