//go:build podman

// Package podman is the podman tier: the real kind CLI with its podman
// provider, and nodes run with that provider's `podman run` flags, under
// rootful podman on this host. test/podman/run.sh sets it up; see
// test/podman/README.md.
package podman

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

const (
	// bootLimit is how long a node may take to reach `running`.
	bootLimit = 60 * time.Second
	// tierBudget is the whole tier's limit (run.sh exports its start).
	tierBudget = 10 * time.Minute
)

var (
	nodeImage  = mustEnv("PODMAN_NODE_IMAGE")
	kindCLI    = mustEnv("PODMAN_KIND")
	namePrefix = mustEnv("PODMAN_NAME_PREFIX")
	runID      = tier.RunID()
)

// mustEnv is tier.RequireEnv for the package's variables, set before
// TestMain runs: a variable missing ends the run.
func mustEnv(key string) string {
	v, err := tier.RequireEnv(key, "run test/podman/run.sh")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	return v
}

// TestMain checks what every test needs, and after the run the tier's time
// budget (run.sh's start, so the image build and load count).
func TestMain(m *testing.M) {
	out, err := podman(30*time.Second, "info", "--format", "{{.Version.Version}} {{.Host.OCIRuntime.Name}} {{.Host.CgroupsVersion}} {{.Host.Security.Rootless}}")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: podman does not answer (run test/podman/run.sh): %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "podman: version, runtime, cgroups, rootless: %s; node image %s; run %s\n", strings.TrimSpace(out), nodeImage, runID)
	if _, err := podman(30*time.Second, "image", "inspect", nodeImage); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: node image %s missing in podman (run test/podman/run.sh): %v\n", nodeImage, err)
		os.Exit(1)
	}
	code := m.Run()
	if tier.OverBudget("podman", "PODMAN_TIER_START", tierBudget) {
		code = 1
	}
	os.Exit(code)
}

// podman runs the podman CLI with a fixed argv and returns its stdout; the
// error carries stderr.
func podman(timeout time.Duration, args ...string) (string, error) {
	return tier.Run(timeout, nil, "podman", args...)
}

// mustPodman is podman that fails the test on error.
func mustPodman(t testing.TB, args ...string) string {
	t.Helper()
	return tier.MustRun(t, 2*time.Minute, "podman", args...)
}

// newNetwork creates a podman network, as kind's provider does (bridge,
// DNS enabled), removed when the test ends.
func newNetwork(t testing.TB, suffix string) string {
	t.Helper()
	name := namePrefix + runID + "-" + suffix
	tier.NewNetwork(t, "podman", name, "-d=bridge")
	return name
}

// gateways returns the IPv4 and IPv6 gateways of a podman network: where
// aardvark-dns answers.
func gateways(t testing.TB, network string) []string {
	t.Helper()
	var nets []struct {
		Subnets []struct{ Gateway string } `json:"subnets"`
	}
	if err := json.Unmarshal([]byte(mustPodman(t, "network", "inspect", network)), &nets); err != nil {
		t.Fatalf("podman network inspect %s: %v", network, err)
	}
	var gws []string
	for _, n := range nets {
		for _, s := range n.Subnets {
			gws = append(gws, s.Gateway)
		}
	}
	if len(gws) == 0 {
		t.Fatalf("network %s has no gateway", network)
	}
	return gws
}

type node struct{ tier.TestNode }

// newNode is the node type of a podman container.
func newNode(t testing.TB, name string) *node {
	return &node{tier.NewTestNode(t, "podman", name)}
}
