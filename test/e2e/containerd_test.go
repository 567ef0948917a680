//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// TestContainerdReadsOurConfig: the node's own containerd loads the
// config.toml the entrypoint edited, and its effective configuration
// (`containerd config dump`, which runs containerd's loader, the migration
// of an older schema included, and fails on a config it rejects) holds the
// snapshotter and restrict_oom_score_adj the plan chose. Cases: the image's
// kind-style `version = 2` file as it is and with each snapshotter kind
// offers, and, where the node's containerd is 2.x (the kind v0.33 stack,
// test/stack), that containerd's own default file (`version = 4` from
// containerd 2.2 on) and the same as a `version = 3` file.
//
// The rootless (user namespace) case, restrict_oom_score_adj = true and
// fuse-overlayfs chosen by the filesystem, runs in the VM tier
// (test/vm), the only host here with a user namespace for nodes.
func TestContainerdReadsOurConfig(t *testing.T) {
	t.Parallel()
	net := newNetwork(t, "ctrd")
	major := containerdMajor(t)
	type dumpCase struct {
		name, image, snapshotter string
	}
	cases := []dumpCase{
		{"v2-default", nodeImage, ""},
		{"v2-native", nodeImage, "native"},
		{"v2-fuse-overlayfs", nodeImage, "fuse-overlayfs"},
	}
	if major >= 2 {
		// containerd 2.x's own defaults: a version 4 file from containerd
		// 2.2 on (3 before), and the same settings as a version 3 file,
		// which 2.2 and later still read (their migration from 3 to 4
		// moves none of the CRI keys the entrypoint edits).
		own := buildImage(t, "kind-entrypoint-e2e/containerd-own:dev", map[string]string{
			"Dockerfile": "FROM " + nodeImage + "\n" +
				"RUN containerd config default > /etc/containerd/config.toml && grep -Eqx 'version = [34]' /etc/containerd/config.toml\n",
		})
		v3 := buildImage(t, "kind-entrypoint-e2e/containerd-v3:dev", map[string]string{
			"Dockerfile": "FROM " + nodeImage + "\n" +
				"RUN containerd config default | sed -E 's/^version = [34]$/version = 3/' > /etc/containerd/config.toml && grep -qx 'version = 3' /etc/containerd/config.toml\n",
		})
		cases = append(cases,
			dumpCase{"own-default", own, ""}, dumpCase{"own-native", own, "native"},
			dumpCase{"v3-default", v3, ""}, dumpCase{"v3-native", v3, "native"})
	} else {
		t.Logf("the node's containerd is %d.x: it reads no version 3 or 4 file, so those cases run on the kind v0.33 stack only (make e2e-stack)", major)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var env []string
			want := "overlayfs"
			if c.snapshotter != "" {
				env = append(env, "KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER="+c.snapshotter)
				want = c.snapshotter
			}
			n := startNode(t, net, c.name, nodeOpts{env: env, image: c.image})
			n.WaitRunning(bootLimit)
			dump, err := n.ExecErr("containerd", "config", "dump")
			if err != nil {
				t.Fatalf("containerd rejects the config the entrypoint left: %v", err)
			}
			snap, restrict, err := tier.CRISettings(dump)
			if err != nil {
				t.Fatalf("%v\n%s", err, dump)
			}
			t.Logf("containerd config dump: snapshotter = %q, restrict_oom_score_adj = %v", snap, restrict)
			if snap != want {
				t.Errorf("containerd's CRI snapshotter is %q, want %q", snap, want)
			}
			if restrict {
				t.Errorf("containerd's restrict_oom_score_adj is true outside a user namespace")
			}
			if got, _ := n.ExecErr("systemctl", "is-active", "containerd.service"); strings.TrimSpace(got) != "active" {
				t.Errorf("containerd.service is %q, want active", strings.TrimSpace(got))
			}
		})
	}
}

// containerdMajor is the major version of the node image's containerd.
func containerdMajor(t *testing.T) int {
	t.Helper()
	out := mustDocker(t, "run", "--rm", "--entrypoint", "containerd", nodeImage, "--version")
	// "containerd github.com/containerd/containerd/v2 v2.3.4 ..." or
	// "containerd github.com/containerd/containerd 1.6.20~ds1 ..."
	f := strings.Fields(out)
	if len(f) < 3 {
		t.Fatalf("containerd --version: %q", out)
	}
	var major int
	if _, err := fmt.Sscanf(strings.TrimPrefix(f[2], "v"), "%d", &major); err != nil {
		t.Fatalf("containerd --version: %q: %v", out, err)
	}
	return major
}

// buildImage builds tag from a build context given as files (name to
// content; "Dockerfile" among them) with the classic builder.
func buildImage(t *testing.T, tag string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := writeBuildContext(dir, files); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("docker", "build", "-q", "-t", tag, dir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build %s: %v\n%s", tag, err, out)
	}
	return tag
}
