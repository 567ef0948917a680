package tier

import (
	"testing"
	"time"
)

// KindNode is the node whose `ENGINE run` flags KindRunArgs writes.
type KindNode struct {
	Name, Network string
	// Cgroupns is the cgroup namespace: "private", as kind passes it, or
	// "host", as kinds before v0.20 ran nodes.
	Cgroupns string
	// NoTTY leaves out --tty, which kind always passes (the benchmarks
	// also boot without it).
	NoTTY bool
	// Podman's only: the cluster its label names, and the anonymous /var
	// volume kind creates first (createAnonymousVolume).
	Cluster, Volume string
}

// KindRunArgs are the flags kind v0.23.0's provider for engine gives
// `ENGINE run` for a worker node with no proxy, no extra mounts or ports,
// --name aside (RunNode adds it). "docker":
// pkg/cluster/internal/providers/docker/provision.go, less its labels and
// the environment it passes. "podman": .../providers/podman/provision.go
// (commonArgs, then runArgsForNode) on a filesystem that needs no
// /dev/mapper, as root (no /dev/fuse). What both providers pass is written
// once; the order of the flags does not matter to either engine.
func KindRunArgs(engine string, n KindNode) []string {
	args := []string{
		"--detach",
		"--hostname", n.Name,
		"--network", n.Network,
		"--privileged",
		"--tmpfs", "/tmp",
		"--tmpfs", "/run",
		"--volume", "/lib/modules:/lib/modules:ro",
		"--cgroupns=" + n.Cgroupns,
	}
	if !n.NoTTY {
		args = append(args, "--tty")
	}
	switch engine {
	case "docker":
		return append(args,
			"--volume", "/var",
			"--security-opt", "seccomp=unconfined",
			"--security-opt", "apparmor=unconfined",
			"--restart=on-failure:1",
			"--init=false",
		)
	case "podman":
		return append(args,
			"--volume", n.Volume+":/var:suid,exec,dev",
			"--label", "io.x-k8s.kind.role=worker",
			"--label", "io.x-k8s.kind.cluster="+n.Cluster,
			"-e", "KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER",
			"-e", "container=podman",
		)
	}
	panic("KindRunArgs: no kind provider for engine " + engine)
}

// RunNode runs the node container name, `ENGINE run --name NAME ARGS...`
// (kind's flags, more flags, the image), and registers its removal with
// its anonymous volumes when the test ends; when the test failed, what
// explains it (Dump) is logged first.
func RunNode(t testing.TB, engine, name string, args ...string) TestNode {
	t.Helper()
	n := NewTestNode(t, engine, name)
	t.Cleanup(func() {
		if t.Failed() {
			n.LogDump()
		}
		if _, err := Run(2*time.Minute, nil, engine, "rm", "--force", "--volumes", name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	MustRun(t, 2*time.Minute, engine, append([]string{"run", "--name", name}, args...)...)
	return n
}

// NewNetwork creates the network name, `ENGINE network create ARGS...
// NAME`, and registers its removal when the test ends (after that of the
// nodes the test runs in it later).
func NewNetwork(t testing.TB, engine, name string, args ...string) {
	t.Helper()
	MustRun(t, 2*time.Minute, engine, append(append([]string{"network", "create"}, args...), name)...)
	t.Cleanup(func() {
		if _, err := Run(time.Minute, nil, engine, "network", "rm", name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}
