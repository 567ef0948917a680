//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/test/tier"
)

const (
	// namePrefix starts every container and network name of the tier;
	// run.sh removes leftovers of interrupted runs by it.
	namePrefix = "kind-ep-e2e-"
	// labelKey marks every container and network the tests create.
	labelKey = "kind-entrypoint-e2e"
	// bakedMachineID is the id test/e2e/node/Dockerfile writes into both
	// /etc/machine-id and /var/lib/dbus/machine-id.
	bakedMachineID = "deadbeefdeadbeefdeadbeefdeadbeef"
	// tierBudget is the whole e2e tier's limit on CI (2 cores).
	tierBudget = 15 * time.Minute
)

var (
	// bootLimit is how long a node may take to reach `running`: 60 s on
	// this host; the VM tier, where a node boots under emulation, gives
	// its own limit in E2E_BOOT_LIMIT.
	bootLimit = mustDuration(envOr("E2E_BOOT_LIMIT", "60s"))
	nodeImage = envOr("E2E_NODE_IMAGE", "kind-entrypoint-e2e/node:dev")
	runID     = tier.RunID()
	// engine is the container engine TestMain checks: docker, or podman
	// for the VM tier's podman test (test/e2e/vm_test.go).
	engine = envOr("E2E_ENGINE", "docker")

	machineIDRe = regexp.MustCompile(`^[0-9a-f]{32}\n$`)
	uuidRe      = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\n?$`)
)

// TestMain checks what every test needs and, after the run, the tier's time
// budget: the tier (run.sh exports its start as E2E_TIER_START, so image
// builds count) must finish within tierBudget.
func TestMain(m *testing.M) {
	version := map[string]string{"docker": "{{.ServerVersion}}", "podman": "{{.Version.Version}}"}[engine]
	if version == "" {
		fmt.Fprintf(os.Stderr, "FAIL: E2E_ENGINE=%q: want docker or podman\n", engine)
		os.Exit(1)
	}
	if out, err := tier.Run(30*time.Second, nil, engine, "info", "--format", version); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %s does not answer (run test/e2e/run.sh): %v\n", engine, err)
		os.Exit(1)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: %s %s, node image %s, run %s\n", engine, strings.TrimSpace(out), nodeImage, runID)
	}
	if _, err := tier.Run(30*time.Second, nil, engine, "image", "inspect", nodeImage); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: node image %s missing (run test/e2e/run.sh): %v\n", nodeImage, err)
		os.Exit(1)
	}
	hostSys := hostSysOptions()
	code := m.Run()
	if after := hostSysOptions(); after != hostSys {
		fmt.Fprintf(os.Stderr, "FAIL: the host's /sys mount changed during the tier: %q -> %q\n", hostSys, after)
		code = 1
	}
	if tier.OverBudget("e2e", "E2E_TIER_START", tierBudget) {
		code = 1
	}
	os.Exit(code)
}

// hostSysOptions returns the per-mount and superblock options of the host's
// /sys: a plain remount inside a node that shared its superblock would show
// here (see ENV.md, "Never remount a shared superblock").
func hostSysOptions() string {
	data, err := os.ReadFile(system.MountinfoPath)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	mounts, err := system.ParseMountinfoFile(data)
	if err != nil {
		return "unparsable: " + err.Error()
	}
	for _, m := range mounts {
		if m.Mountpoint == "/sys" {
			return m.Options + " " + m.VFSOptions
		}
	}
	return "none"
}

// network is a user-defined Docker network: kind's nodes need one for
// Docker's embedded DNS.
type network struct {
	Name    string
	Gateway string // IPv4 gateway: the "host IP" the entrypoint finds
}

// newNetwork creates a network removed when the test ends.
func newNetwork(t testing.TB, suffix string, extra ...string) *network {
	t.Helper()
	name := namePrefix + runID + "-" + suffix
	tier.NewNetwork(t, "docker", name, append([]string{"--label", labelKey + "=" + runID}, extra...)...)
	gw := strings.Fields(mustDocker(t, "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}} {{end}}", name))
	n := &network{Name: name}
	for _, g := range gw {
		if !strings.Contains(g, ":") {
			n.Gateway = g
		}
	}
	if n.Gateway == "" {
		t.Fatalf("network %s has no IPv4 gateway: %q", name, gw)
	}
	return n
}

// nodeOpts changes the kind flags of a node.
type nodeOpts struct {
	cgroupns string   // default "private", as kind passes
	env      []string // KEY=VALUE
	extra    []string // more docker run flags, before the image
	image    string   // default nodeImage
	// noTTY starts the node without --tty: systemd's console reset can
	// drop the entrypoint's last lines from a tty's log (see logs).
	noTTY bool
}

// node is a node container of the tier. Its log (MustLog) holds the
// entrypoint's lines and systemd's console output, without the tty's
// carriage returns.
//
// Lines the entrypoint writes shortly before init starts can be missing
// from `docker logs`. systemd, starting as PID 1, resets /dev/console
// (reset_terminal_fd ends with tcflush(TCIOFLUSH)); on a pty that discards
// what the kernel has not handed to Docker's reader yet. Seen with
// -parallel 4 on 2 cores for the reference bash script and for our binary
// (docs/performance.md, "The last lines on a tty": only the last two lines, and the
// default --tty-settle=0 does not wait for them; checkClosingLines allows
// exactly that). kind itself waits for "detected cgroup v1" in that log.
// The tests that assert log lines run sequentially, before the parallel
// ones, on an otherwise idle Docker.
type node struct {
	tier.TestNode
	Network *network
}

// startNode runs a node container the way kind does and registers its
// removal (with its /var volume); when the test failed, the node's logs,
// failed units and journal are dumped first.
func startNode(t testing.TB, net *network, suffix string, o nodeOpts) *node {
	t.Helper()
	if o.cgroupns == "" {
		o.cgroupns = "private"
	}
	name := namePrefix + runID + "-" + suffix
	args := append([]string{"--label", labelKey + "=" + runID},
		tier.KindRunArgs("docker", tier.KindNode{Name: name, Network: net.Name, Cgroupns: o.cgroupns, NoTTY: o.noTTY})...)
	for _, e := range o.env {
		args = append(args, "--env", e)
	}
	args = append(args, o.extra...)
	if o.image == "" {
		o.image = nodeImage
	}
	return &node{TestNode: tier.RunNode(t, "docker", name, append(args, o.image)...), Network: net}
}

// writeFile writes data to path in the node (through tee: no shell).
func (n *node) writeFile(path, data string) {
	n.T.Helper()
	if _, err := dockerStdin(time.Minute, []byte(data), "exec", "-i", n.Name, "tee", path); err != nil {
		n.T.Fatal(err)
	}
}

// readFile returns a file of the node.
func (n *node) readFile(path string) string {
	n.T.Helper()
	return n.MustExec("cat", path)
}

// ip returns the node's IPv4 address on its network.
func (n *node) ip() string {
	n.T.Helper()
	out := mustDocker(n.T, "inspect", "-f", fmt.Sprintf("{{(index .NetworkSettings.Networks %q).IPAddress}}", n.Network.Name), n.Name)
	ip := strings.TrimSpace(out)
	if ip == "" {
		n.T.Fatalf("%s: no IPv4 address on %s", n.Name, n.Network.Name)
	}
	return ip
}

// requireContains fails unless text contains each wanted string.
func requireContains(t testing.TB, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s: %q not found in:\n%s", what, w, text)
		}
	}
}

// natRules returns the nat table of the iptables backend that holds
// Docker's DNS rules in the node (the node's own alternative may or may not
// point there yet), and that backend's name.
func (n *node) natRules() (rules, mode string) {
	n.T.Helper()
	for _, m := range []string{"nft", "legacy"} {
		out, err := n.ExecErr("iptables-"+m+"-save", "-t", "nat")
		if err == nil && strings.Contains(out, "DOCKER_OUTPUT") {
			return out, m
		}
	}
	n.T.Fatalf("%s: no iptables backend holds Docker's DOCKER_OUTPUT chain", n.Name)
	return "", ""
}

// ruleLines returns the "-A ..." lines of an iptables-save text.
func ruleLines(save string) []string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "-A ") {
			out = append(out, l)
		}
	}
	return out
}
