//go:build cluster

// The cluster tier: real Kubernetes (kubeadm, kubelet, containerd, CoreDNS,
// kube-proxy, a CNI) on nodes booted by the entrypoint, created by the real
// kind CLI. test/cluster/run.sh builds the images and runs these tests.
package cluster

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// namePrefix starts every cluster, container and network name of the tier:
// run.sh and cleanup find leftovers by it. The matrix (matrix_test.go) has
// its own, so that neither run removes the other's clusters.
const namePrefix = "kind-ep-cl-"

// The environment run.sh sets (the VM's cluster suite sets only what its
// test reads): the images, kind's CLIs (the release made for this
// Kubernetes, and v0.23.0) and where each cluster's state and logs go.
const (
	envImage             = "CLUSTER_IMAGE"
	envReferenceImage    = "CLUSTER_REFERENCE_IMAGE"
	envReferenceOldImage = "CLUSTER_REFERENCE_OLD_IMAGE" // kind v0.23.0's script, which does not rewrite kubelet.conf
	envKind              = "CLUSTER_KIND"
	envKindOld           = "CLUSTER_KIND_OLD"
	envLogDir            = "CLUSTER_LOG_DIR"
	// test/nerdctl/run.sh's: the nerdctl CLI kind runs, and the prefix of
	// every name its test gives (run.sh removes leftovers by it)
	envNerdctl       = "NERDCTL_CLI"
	envNerdctlPrefix = "NERDCTL_NAME_PREFIX"
)

// cli runs the cluster's container engine (docker, podman or nerdctl) the
// same way.
func (c *cluster) cli(timeout time.Duration, stdin []byte, args ...string) (string, error) {
	timeout, err := c.within(timeout)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", c.engine, strings.Join(args, " "), err)
	}
	return tier.Run(timeout, stdin, c.engine, args...)
}

// logs runs the engine's logs, as cli runs the rest.
func (c *cluster) logs(timeout time.Duration, args ...string) (string, error) {
	timeout, err := c.within(timeout)
	if err != nil {
		return "", fmt.Errorf("%s logs %s: %w", c.engine, strings.Join(args, " "), err)
	}
	return tier.Logs(timeout, c.engine, args...)
}

// within is timeout, or less when c.end comes sooner; past c.end, an
// error that says so.
func (c *cluster) within(timeout time.Duration) (time.Duration, error) {
	if c.end.IsZero() {
		return timeout, nil
	}
	left := time.Until(c.end)
	if left <= 0 {
		return 0, errors.New("out of time: the test's last minutes before -test.timeout are its cleanup's")
	}
	return min(timeout, left), nil
}

// setDeadline sets c.end and c.hardEnd from the test's deadline, if it has
// one: remove gets the slow×2 minutes before the last 30 s to export the
// logs and delete the cluster (each of its calls keeps to that, so a hung
// one cannot take the rest), and the 30 s are the test binary's, to write
// its output.
func (c *cluster) setDeadline(t *testing.T) {
	if d, ok := t.Deadline(); ok {
		c.hardEnd = d.Add(-30 * time.Second)
		c.end = c.hardEnd.Add(-c.slow * 2 * time.Minute)
	}
}

func mustEnv(t *testing.T, key string) string {
	t.Helper()
	return tier.MustEnv(t, key, "run test/cluster/run.sh (make e2e-cluster)")
}

// TestOurNodes: a 1+1 cluster from our image, created by the kind release
// made for this Kubernetes; checked, restarted with new IPs, checked again.
func TestOurNodes(t *testing.T) {
	c := createCluster(t, spec{tag: "ours", image: mustEnv(t, envImage), kind: mustEnv(t, envKind), workers: 1})
	c.checkAcrossRestart(t, nil)
}

// TestReferenceScript is the control run: the same tier with kind's own
// script as the node image's entrypoint, from the kind release made for this
// Kubernetes. It is the reference the entrypoint is held to: v0.23.0's script plus the one later
// change, kubelet.conf among the files an IP change rewrites. Where this
// fails too, the fault is the recipe's.
func TestReferenceScript(t *testing.T) {
	c := createCluster(t, spec{tag: "ref", image: mustEnv(t, envReferenceImage), kind: mustEnv(t, envKind), workers: 1})
	c.checkAcrossRestart(t, nil)
}

// TestReferenceScriptV023: kind v0.23.0's script, before that change. Since
// kubeadm points a control plane's kubelet.conf at the node's own address,
// its restart with a new IP leaves the kubelet talking to the old one. The
// test shows that, which is why the entrypoint rewrites kubelet.conf.
func TestReferenceScriptV023(t *testing.T) {
	c := createCluster(t, spec{tag: "ref023", image: mustEnv(t, envReferenceOldImage), kind: mustEnv(t, envKind), workers: 1})
	c.staleKubeletConf = true
	c.checkAll(t, "before-restart")
	c.restartWithNewIPs(t)
}

// TestOlderKind: kind v0.23.0, whose node-image contract the entrypoint
// keeps, drives our image to a Ready cluster whose pods resolve names.
func TestOlderKind(t *testing.T) {
	c := createCluster(t, spec{tag: "old", image: mustEnv(t, envImage), kind: mustEnv(t, envKindOld)})
	c.checkAll(t, "created")
}

// spec is what createCluster makes.
type spec struct {
	tag, image, kind string
	// controlPlanes (0 means 1) and workers: the nodes; with more than one
	// control plane kind puts its load balancer in front of them
	controlPlanes, workers int
	// family is kind's networking.ipFamily: ipv4 (when empty), ipv6, dual
	family string
	// engine is kind's provider: docker (when empty), podman or nerdctl
	// (nerdctl_test.go: the CLI NERDCTL_CLI names)
	engine string
	// prefix starts every name the cluster makes (namePrefix when empty)
	prefix string
	// slow stretches every time limit of the checks (0 or 1: as on this
	// host); the VM's cluster suite runs under emulation
	slow int
	// kubeadmPatches go into kind's config as kubeadmConfigPatches
	kubeadmPatches []string
	// mounts go into every node of kind's config as read-only
	// extraMounts: host path -> path in the node
	mounts map[string]string
}

type cluster struct {
	name, image, kind string
	net               string
	logDir            string
	slow              time.Duration // a factor: see spec.slow
	nodes             []string      // control planes first
	controlPlanes     int           // the first ones of nodes
	lb                string        // kind's load balancer container, if any
	family            string        // ipv4, ipv6 or dual
	provider          string        // kind's: docker, podman or nerdctl
	engine            string        // the provider's CLI: its name, or nerdctl's path
	prefix            string
	env               []string
	throwaways        int // containers made to hold old addresses
	// end: when the test's own calls to the engine and kind stop (zero: no
	// limit), so that remove, the cleanup, has its time before the test's
	// -test.timeout, which would otherwise cut it off with the rest (no
	// logs, the nodes left running); hardEnd: when remove's stop.
	end, hardEnd time.Time
	// createTime: from `kind create cluster` to every node Ready
	createTime time.Duration
	// staleKubeletConf: the node's script leaves the old address in the
	// control plane's kubelet.conf (kind v0.23.0's)
	staleKubeletConf bool
}

func (c *cluster) cp() string { return c.nodes[0] }

// checkAcrossRestart checks the cluster (more first, when not nil: a
// provider's own checks, then checkAll), restarts its nodes with new
// addresses, waits up to 5 minutes for it to be Ready again, and checks it
// again.
func (c *cluster) checkAcrossRestart(t *testing.T, more func(t *testing.T, stage string)) {
	t.Helper()
	check := func(stage string) {
		if more != nil {
			more(t, stage)
		}
		c.checkAll(t, stage)
	}
	check("before-restart")
	c.readySince(t, c.restartWithNewIPs(t), 5*time.Minute)
	check("after-restart")
}

// families are the IP families of the cluster, the primary one first (as
// kind orders them: IPv4 first in dual-stack).
func (c *cluster) families() []family {
	switch c.family {
	case "ipv6":
		return []family{ipv6}
	case "dual":
		return []family{ipv4, ipv6}
	}
	return []family{ipv4}
}

type family int

const (
	ipv4 family = 4
	ipv6 family = 6
)

func (f family) String() string { return fmt.Sprintf("IPv%d", int(f)) }

func familyOf(a netip.Addr) family {
	if a.Unmap().Is4() {
		return ipv4
	}
	return ipv6
}

// kindNodeNames: kind names its nodes CLUSTER-ROLE, then CLUSTER-ROLE2...
func kindNodeNames(cluster, role string, n int) []string {
	var names []string
	for i := 1; i <= n; i++ {
		name := cluster + "-" + role
		if i > 1 {
			name += fmt.Sprint(i)
		}
		names = append(names, name)
	}
	return names
}

// createCluster runs `kind create cluster --wait` for the nodes of s, waits
// for every node to be Ready, and removes all it made when the test ends,
// exporting the node logs first if the test failed.
func createCluster(t *testing.T, s spec) *cluster {
	t.Helper()
	prefix := cmp.Or(s.prefix, namePrefix)
	id := fmt.Sprintf("%s%s-%d", prefix, s.tag, time.Now().Unix()%100000)
	c := &cluster{name: id, image: s.image, kind: s.kind, net: id + "-net",
		logDir: mustEnv(t, envLogDir), slow: time.Duration(max(s.slow, 1)),
		controlPlanes: max(s.controlPlanes, 1), family: cmp.Or(s.family, "ipv4"),
		provider: cmp.Or(s.engine, "docker"), prefix: prefix}
	c.engine = c.provider
	c.setDeadline(t)
	c.nodes = append(kindNodeNames(id, "control-plane", c.controlPlanes), kindNodeNames(id, "worker", s.workers)...)
	if c.controlPlanes > 1 {
		c.lb = id + "-external-load-balancer"
	}
	cfg := "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n"
	if s.family != "" {
		cfg += "networking:\n  ipFamily: " + s.family + "\n"
	}
	var mounts string
	for _, host := range slices.Sorted(maps.Keys(s.mounts)) {
		mounts += fmt.Sprintf("  - hostPath: %s\n    containerPath: %s\n    readOnly: true\n", host, s.mounts[host])
	}
	if mounts != "" {
		mounts = "  extraMounts:\n" + mounts
	}
	cfg += "nodes:\n" + strings.Repeat("- role: control-plane\n"+mounts, c.controlPlanes) + strings.Repeat("- role: worker\n"+mounts, s.workers)
	if len(s.kubeadmPatches) > 0 {
		cfg += "kubeadmConfigPatches:\n"
		for _, p := range s.kubeadmPatches {
			cfg += "- |\n  " + strings.ReplaceAll(strings.TrimSpace(p), "\n", "\n  ") + "\n"
		}
	}
	cfgFile := filepath.Join(t.TempDir(), "kind.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// our own network, not the user's "kind" one
	c.env = append(os.Environ(), "KIND_EXPERIMENTAL_DOCKER_NETWORK="+c.net)
	switch c.provider {
	case "podman":
		c.env = append(c.env, "KIND_EXPERIMENTAL_PROVIDER=podman", "KIND_EXPERIMENTAL_PODMAN_NETWORK="+c.net)
	case "nerdctl":
		// kind's nerdctl provider runs the `nerdctl` on PATH, and always on
		// its network "kind" (no variable names another): here in the
		// nerdctl tier's own CNI directory (test/nerdctl/run.sh).
		c.engine, c.net = mustEnv(t, envNerdctl), "kind"
		c.env = append(c.env, "KIND_EXPERIMENTAL_PROVIDER=nerdctl",
			"PATH="+filepath.Dir(c.engine)+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	t.Cleanup(func() { c.remove(t) })

	// kind's --wait polls the control plane's Ready with `docker exec
	// kubectl` back to back, with no pause between tries (tryUntil in its
	// waitforready action). Under emulation each try costs seconds of CPU
	// (with rootless podman, a podman process of its own as well). In the
	// VM under rootless podman it ran for its whole 20 minutes beside an
	// API server failing its probes at a load of 20 to 30 on 2 CPUs
	// (run-20261203-193336); with the paced wait below as the only one,
	// the next run passed (run-20261203-214717), its load no lower. One
	// run each way: the likeliest cause, not a proven one. There the wait
	// below gets kind's time added to its own: kind's own default is no
	// wait at all.
	wait, readyLimit := (c.slow * 5 * time.Minute).String(), 5*time.Minute
	if c.slow > 1 {
		wait, readyLimit = "0s", 10*time.Minute
	}
	start := time.Now()
	out, err := c.kindCmd(c.slow*10*time.Minute, "create", "cluster", "--name", c.name, "--image", s.image,
		"--config", cfgFile, "--retain", "--wait", wait)
	t.Logf("%s create cluster --image %s (%v):\n%s", s.kind, s.image, time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("kind create cluster: %v", err)
	}
	// kind waits for the control plane (or not, above); a user waits for
	// every node
	if err := c.eventually(readyLimit, c.nodesReady); err != nil {
		t.Fatalf("nodes after kind create cluster: %v", err)
	}
	c.createTime = time.Since(start)
	t.Logf("created, every node Ready, in %v", c.createTime.Round(time.Second))
	return c
}

func (c *cluster) kindCmd(timeout time.Duration, args ...string) (string, error) {
	timeout, err := c.within(timeout)
	if err != nil {
		return "", fmt.Errorf("kind %s: %w", args[0], err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kind, args...)
	cmd.Env = c.env
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("kind %s: timed out after %v", args[0], timeout)
	}
	return string(out), err
}

// remove deletes the cluster, the throwaway containers and the network; on
// failure it first exports the node logs and prints, per node, the
// entrypoint's lines, the failed units and the kubelet's journal, and per
// control plane the last lines of etcd and the API server.
func (c *cluster) remove(t *testing.T) {
	c.end = c.hardEnd
	if t.Failed() {
		dir := filepath.Join(c.logDir, c.name)
		out, err := c.kindCmd(c.slow*5*time.Minute, "export", "logs", dir, "--name", c.name)
		t.Logf("kind export logs %s: %v\n%s", dir, err, lastLines(out, 5))
		for i, n := range c.nodes {
			logs, _ := c.logs(time.Minute, "--tail", "80", n)
			t.Logf("=== %s: %s logs\n%s", n, c.engine, strings.ReplaceAll(logs, "\r", ""))
			failed, _ := c.cli(time.Minute, nil, "exec", n, "systemctl", "--failed", "--no-pager")
			t.Logf("=== %s: failed units\n%s", n, failed)
			kubelet, _ := c.cli(time.Minute, nil, "exec", n, "journalctl", "-u", "kubelet", "--no-pager", "-n", "40")
			t.Logf("=== %s: kubelet\n%s", n, kubelet)
			if i >= c.controlPlanes {
				continue
			}
			// the kubelet's logs of the static pods (the node image has
			// no crictl): the newest file of each
			for _, component := range []string{"etcd", "kube-apiserver"} {
				files, _ := c.cli(time.Minute, nil, "exec", n, "find", "/var/log/pods", "-path", "*_"+component+"-*", "-name", "*.log", "-printf", "%T@ %p\n")
				if f := strings.Split(strings.TrimSpace(files), "\n"); f[0] != "" {
					slices.Sort(f) // by modification time
					newest := f[len(f)-1][strings.Index(f[len(f)-1], " ")+1:]
					logs, _ := c.cli(time.Minute, nil, "exec", n, "tail", "-n", "30", newest)
					t.Logf("=== %s: %s (%s)\n%s", n, component, newest, logs)
				}
			}
		}
		if c.lb != "" {
			logs, _ := c.logs(time.Minute, "--tail", "40", c.lb)
			t.Logf("=== %s: %s logs\n%s", c.lb, c.engine, logs)
		}
	}
	var out string
	del := func() error {
		var err error
		out, err = c.kindCmd(c.slow*5*time.Minute, "delete", "cluster", "--name", c.name)
		return err
	}
	if err := del(); err != nil {
		if err := c.thawAndRetry(t, c.nodes, err, del); err != nil {
			t.Errorf("kind delete cluster: %v\n%s", err, out)
		}
	}
	if ids, _ := c.cli(time.Minute, nil, "ps", "-aq", "--filter", "label="+c.prefix+"throwaway="+c.name); strings.TrimSpace(ids) != "" {
		args := append([]string{"rm", "-f", "-v"}, strings.Fields(ids)...)
		if _, err := c.cli(time.Minute, nil, args...); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	if _, err := c.cli(time.Minute, nil, "network", "rm", c.net); err != nil && !strings.Contains(err.Error(), "No such network") && !strings.Contains(err.Error(), "not found") {
		t.Errorf("cleanup: %v", err)
	}
}

// kubectl runs kubectl on the control-plane node with its admin kubeconfig.
// A call that could not connect to the API server is made again (see
// kubectlWithin).
func (c *cluster) kubectl(stdin string, args ...string) (string, error) {
	return c.kubectlWithin(c.slow*2*time.Minute, stdin, func(time.Duration) []string { return args })
}

// waitReady waits up to limit for condition Ready on objs, with kubectl
// wait; a wait that lost the API server goes on with the time left.
func (c *cluster) waitReady(limit time.Duration, objs ...string) (string, error) {
	return c.kubectlWithin(limit, "", func(left time.Duration) []string {
		return append([]string{"wait", "--for=condition=Ready", "--timeout=" + left.String()}, objs...)
	})
}

// kubectlWithin runs kubectl with args(time left) until limit passes. An
// API server under emulation can let a TLS handshake time out while it
// serves the rest ("Unable to connect to the server: net/http: TLS
// handshake timeout", kubectl wait, cgroup v2 VM). When kubectl could not
// reach the server (apiUnreachable) the call is made again, 5 s later,
// with the time left:
// the tier's calls are reads, waits, applies and deletes, which a repeat
// does not change (a delete that did land before the connection broke
// fails its repeat with NotFound, which the caller then reports). Any
// other failure is returned at once.
func (c *cluster) kubectlWithin(limit time.Duration, stdin string, args func(left time.Duration) []string) (string, error) {
	argv := []string{"exec"}
	var in []byte
	if stdin != "" {
		argv = append(argv, "-i")
		in = []byte(stdin)
	}
	argv = append(argv, c.cp(), "kubectl", "--kubeconfig=/etc/kubernetes/admin.conf")
	deadline := time.Now().Add(limit)
	for {
		left := time.Until(deadline).Round(time.Second)
		out, err := c.cli(left+time.Minute, in, append(argv, args(left)...)...)
		if err == nil || !apiUnreachable(err) || time.Until(deadline) < 10*time.Second {
			return out, err
		}
		time.Sleep(5 * time.Second)
	}
}

// apiUnreachable: kubectl failed because it could not reach the API
// server: "Unable to connect to the server"; an apply's validation that
// could not download the OpenAPI schema, so the apply was never sent (a
// TLS handshake timeout there failed a dual-stack run's probe pods in the
// cgroup v2 VM, run-20261204-214838); or a request to the server's https
// URL (the admin kubeconfig's; a probe's requests are plain http) refused
// or reset, as kubectl 1.37 words it while the API server restarts
// (`error: Get "https://...:6443/...": dial tcp ...: connect: connection
// refused`, run-20261205-004339), or older kubectl ("The connection to the
// server ... was refused").
func apiUnreachable(err error) bool {
	s := err.Error()
	switch {
	case strings.Contains(s, "Unable to connect to the server"), strings.Contains(s, "failed to download openapi"),
		strings.Contains(s, "The connection to the server") && strings.Contains(s, "was refused"):
		return true
	}
	return strings.Contains(s, `"https://`) &&
		(strings.Contains(s, "connect: connection refused") || strings.Contains(s, "connection reset by peer"))
}

// eventually retries f until it succeeds or slow×limit passes (slow is a
// factor: spec.slow), and returns its last error. Between tries it pauses
// (see pause): under emulation (the VM, slow 4) one try, an exec of
// kubectl in a node, takes seconds of CPU itself, and tries back to back
// starve the control plane they wait for.
func eventually(slow, limit time.Duration, f func() error) error {
	return eventuallyUntil(time.Time{}, slow, limit, f)
}

// eventually is eventually(c.slow, limit, f) that stops at c.end too.
func (c *cluster) eventually(limit time.Duration, f func() error) error {
	return eventuallyUntil(c.end, c.slow, limit, f)
}

// eventuallyUntil is eventually that stops at end too, if end is not zero.
func eventuallyUntil(end time.Time, slow, limit time.Duration, f func() error) error {
	deadline := time.Now().Add(slow * limit)
	if !end.IsZero() && end.Before(deadline) {
		deadline = end
	}
	for {
		start := time.Now()
		err := f()
		took := time.Since(start)
		left := time.Until(deadline)
		if err == nil || left <= 0 {
			return err
		}
		time.Sleep(pause(slow, took, left))
	}
}

// pause is how long eventually waits after a try that took took, with left
// until its deadline: slow×2 s, or as long as the try itself took if that
// was longer, and never past the deadline. A try that is slow because the
// node is starved (rootless podman in the VM, where each try is a podman
// exec of kubectl) thus takes at most about half of the time it polls, and
// the control plane it waits for keeps the rest.
func pause(slow, took, left time.Duration) time.Duration {
	return min(max(slow*2*time.Second, took), left)
}

// checkAll: every node Ready, every kube-system pod Running and ready, then
// DNS and pod-to-pod traffic. The cluster's state goes to the log and to
// CLUSTER_LOG_DIR/NAME-STAGE.txt.
func (c *cluster) checkAll(t *testing.T, stage string) {
	t.Helper()
	start := time.Now()
	if err := c.eventually(5*time.Minute, c.nodesReady); err != nil {
		t.Fatalf("%s: nodes: %v", stage, err)
	}
	if err := c.eventually(5*time.Minute, c.systemPodsRunning); err != nil {
		t.Fatalf("%s: kube-system pods: %v", stage, err)
	}
	t.Logf("%s: nodes Ready and kube-system pods Running after %v", stage, time.Since(start).Round(time.Second))
	c.recordState(t, stage)
	c.checkContainerd(t, stage)
	c.checkTraffic(t, stage)
}

// checkContainerd: in every node, containerd reads what the entrypoint
// wrote. containerd's effective configuration (`containerd config dump`:
// its own loader, which migrates kind's version 2 file on containerd 2.x
// and fails on a file it rejects) must hold the snapshotter and
// restrict_oom_score_adj of the node's config.toml as the entrypoint left
// it; the snapshotter must be the one the node's log announced (kind's
// "overlayfs" when it changed none), and in a user namespace
// restrict_oom_score_adj must be true (outside one the entrypoint leaves
// the image's value: the cluster tier's image sets it, ENV.md). Each
// node's dump goes to the log directory, NODE-STAGE-containerd-config-dump.txt.
func (c *cluster) checkContainerd(t *testing.T, stage string) {
	t.Helper()
	for _, n := range c.nodes {
		if err := c.nodeContainerd(n, stage, t.Logf); err != nil {
			t.Errorf("%s: %s: %v", stage, n, err)
		}
	}
}

func (c *cluster) nodeContainerd(n, stage string, logf func(string, ...any)) error {
	inNode := func(argv ...string) (string, error) {
		return c.cli(c.slow*time.Minute, nil, append([]string{"exec", n}, argv...)...)
	}
	dump, err := inNode("containerd", "config", "dump")
	if err != nil {
		return fmt.Errorf("containerd rejects the config the entrypoint left: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.logDir, n+"-"+stage+"-containerd-config-dump.txt"), []byte(dump), 0o644); err != nil {
		return err
	}
	snap, restrict, err := tier.CRISettings(dump)
	if err != nil {
		return fmt.Errorf("containerd config dump: %w", err)
	}
	file, err := inNode("cat", "/etc/containerd/config.toml")
	if err != nil {
		return err
	}
	fileSnap, fileRestrict, err := tier.CRISettings(file)
	if err != nil {
		return fmt.Errorf("/etc/containerd/config.toml: %w", err)
	}
	uidMap, err := inNode("cat", "/proc/self/uid_map")
	if err != nil {
		return err
	}
	userns := strings.Join(strings.Fields(uidMap), " ") != "0 0 4294967295"
	log, err := c.logs(c.slow*time.Minute, n)
	if err != nil {
		return err
	}
	announced := cmp.Or(announcedSnapshotter(log), "overlayfs")
	logf("%s: %s: containerd config dump: snapshotter = %q, restrict_oom_score_adj = %v (config.toml: %q, %v; announced: %q; user namespace: %v)",
		stage, n, snap, restrict, fileSnap, fileRestrict, announced, userns)
	var errs []error
	if snap != fileSnap || restrict != fileRestrict {
		errs = append(errs, fmt.Errorf("containerd runs with snapshotter %q and restrict_oom_score_adj %v, its config.toml says %q and %v", snap, restrict, fileSnap, fileRestrict))
	}
	if snap != announced {
		errs = append(errs, fmt.Errorf("containerd's CRI snapshotter is %q, the entrypoint announced %q", snap, announced))
	}
	if userns && !restrict {
		errs = append(errs, fmt.Errorf("containerd's restrict_oom_score_adj is false in a user namespace"))
	}
	return errors.Join(errs...)
}

// announcedSnapshotter is the snapshotter of the last `changing snapshotter
// from "A" to "B"` line of a node's log (both scripts and ours write it),
// or "" when there is none.
func announcedSnapshotter(log string) string {
	var snap string
	for line := range strings.Lines(log) {
		if !strings.Contains(line, "changing snapshotter from ") {
			continue
		}
		if q := strings.Split(line, `"`); len(q) == 5 {
			snap = q[3]
		}
	}
	return snap
}

func (c *cluster) nodesReady() error {
	out, err := c.kubectl("", "get", "nodes", "-o",
		`jsonpath={range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[1] == "True" {
			ready[f[0]] = true
		}
	}
	for _, n := range c.nodes {
		if !ready[n] {
			return fmt.Errorf("%s is not Ready:\n%s", n, out)
		}
	}
	return nil
}

func (c *cluster) systemPodsRunning() error {
	out, err := c.kubectl("", "get", "pods", "-n", "kube-system", "-o",
		`jsonpath={range .items[*]}{.metadata.name}{" "}{.status.phase}{" "}{.status.containerStatuses[*].ready}{"\n"}{end}`)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var bad []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 || f[1] != "Running" || slices.Contains(f[2:], "false") {
			bad = append(bad, l)
		}
	}
	// kubeadm's control plane (4 per control-plane node), CoreDNS (2), and
	// per node kube-proxy and the CNI.
	if want := 4*c.controlPlanes + 2 + 2*len(c.nodes); len(lines) < want {
		return fmt.Errorf("%d kube-system pods, want at least %d:\n%s", len(lines), want, out)
	}
	if len(bad) > 0 {
		return fmt.Errorf("not Running and ready:\n%s", strings.Join(bad, "\n"))
	}
	return nil
}

func (c *cluster) recordState(t *testing.T, stage string) {
	t.Helper()
	nodes, err1 := c.kubectl("", "get", "nodes", "-o", "wide")
	pods, err2 := c.kubectl("", "get", "pods", "-A", "-o", "wide")
	text := fmt.Sprintf("$ kubectl get nodes -o wide\n%s\n$ kubectl get pods -A -o wide\n%s", nodes, pods)
	t.Logf("%s (errors: %v, %v):\n%s", stage, err1, err2, text)
	if err := os.WriteFile(filepath.Join(c.logDir, c.name+"-"+stage+".txt"), []byte(text), 0o644); err != nil {
		t.Error(err)
	}
	// Where each node's DNS goes (resolv.conf) and the rules that take it
	// there in nftables (Docker 29's nftables backend and ours: see
	// test/docker29), with the entrypoint's own lines, for the record.
	var b strings.Builder
	for _, n := range c.nodes {
		for _, args := range [][]string{{"cat", "/etc/resolv.conf"}, {"nft", "list", "ruleset"}} {
			out, err := c.cli(time.Minute, nil, append([]string{"exec", n}, args...)...)
			fmt.Fprintf(&b, "$ %s exec %s %s (error: %v)\n%s\n", c.engine, n, strings.Join(args, " "), err, out)
		}
		logs, err := c.logs(time.Minute, n)
		fmt.Fprintf(&b, "$ %s logs %s | the entrypoint's lines (error: %v)\n%s\n", c.engine, n, err,
			strings.Join(tier.EntrypointLines(strings.ReplaceAll(logs, "\r", "")), "\n"))
	}
	file := filepath.Join(c.logDir, c.name+"-"+stage+"-dns.txt")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("%s: each node's resolv.conf, nft ruleset and entrypoint lines: %s", stage, file)
}

// checkTraffic: a pod on the last node (a worker, when there is one)
//   - resolves the cluster's own service name, which CoreDNS answers;
//   - resolves the first control plane's container name, which CoreDNS
//     forwards to the node's resolv.conf and so to Docker's embedded DNS
//     through the rules step 10 rewrote, in each family that DNS can answer
//     in (see dockerDNSFamilies);
//   - reaches a pod on every other node over the pod network, at each of
//     that pod's addresses: one per family of the cluster.
func (c *cluster) checkTraffic(t *testing.T, stage string) {
	t.Helper()
	client, servers := c.nodes[len(c.nodes)-1], c.nodes[:len(c.nodes)-1]
	if len(servers) == 0 {
		servers = c.nodes // one node: the pod reaches a pod beside it
	}
	manifest := fmt.Sprintf(podManifest, "probe-client", client, `["/podprobe"]`)
	pods := []string{"pod/probe-client"}
	for i, n := range servers {
		name := fmt.Sprintf("probe-server-%d", i)
		manifest += "---\n" + fmt.Sprintf(podManifest, name, n, `["/podprobe", "serve", ":8080"]`)
		pods = append(pods, "pod/"+name)
	}
	if out, err := c.kubectl(manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("%s: apply probe pods: %v\n%s", stage, err, out)
	}
	defer func() {
		if out, err := c.kubectl("", append([]string{"delete", "--grace-period=1", "--wait=true"}, pods...)...); err != nil {
			t.Errorf("%s: delete probe pods: %v\n%s", stage, err, out)
		}
	}()
	if out, err := c.waitReady(c.slow*3*time.Minute, pods...); err != nil {
		desc, _ := c.kubectl("", append([]string{"describe"}, pods...)...)
		t.Fatalf("%s: probe pods not Ready: %v\n%s\n%s", stage, err, out, desc)
	}
	type check struct {
		what string
		args []string
		want []string
	}
	svcIPs, err := c.kubectl("", "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIPs[*]}")
	if err != nil {
		t.Fatal(err)
	}
	checks := []check{{"the kubernetes service's name", []string{"resolve", "kubernetes.default.svc.cluster.local"}, strings.Fields(svcIPs)}}
	if fams, why := c.dockerDNSFamilies(); len(fams) > 0 {
		var want []string
		for _, f := range fams {
			want = append(want, c.nodeAddr(t, c.cp(), f).String())
		}
		dns := "Docker's DNS"
		if c.provider == "podman" {
			dns = "podman's aardvark-dns"
		}
		checks = append(checks, check{fmt.Sprintf("the control-plane node's container name (%s, %v)", dns, fams),
			[]string{"resolve", c.cp()}, want})
	} else {
		t.Logf("%s: no check of a node container's name: %s", stage, why)
	}
	for i, n := range servers {
		name := fmt.Sprintf("probe-server-%d", i)
		ips, err := c.kubectl("", "get", "pod", name, "-o", "jsonpath={.status.podIPs[*].ip}")
		if err != nil {
			t.Fatal(err)
		}
		var fams []family
		for _, ip := range strings.Fields(ips) {
			a, err := netip.ParseAddr(ip)
			if err != nil {
				t.Fatalf("%s: pod %s: IP %q: %v", stage, name, ip, err)
			}
			fams = append(fams, familyOf(a))
			checks = append(checks, check{fmt.Sprintf("a pod on %s from %s over %v", n, client, familyOf(a)),
				[]string{"get", "http://" + netip.AddrPortFrom(a, 8080).String() + "/"}, []string{name}})
		}
		if !slices.Equal(fams, c.families()) {
			t.Errorf("%s: pod %s has addresses %q, want one per family %v", stage, name, ips, c.families())
		}
	}
	recorded := false
	for _, ch := range checks {
		var out string
		err := c.eventually(time.Minute, func() error {
			var err error
			out, err = c.kubectl("", append([]string{"exec", "probe-client", "--", "/podprobe"}, ch.args...)...)
			for _, w := range ch.want {
				if err == nil && !slices.Contains(strings.Fields(out), w) {
					err = fmt.Errorf("got %q, want %q in it", strings.TrimSpace(out), w)
				}
			}
			return err
		})
		if err != nil {
			t.Errorf("%s: %s: podprobe %s: %v", stage, ch.what, strings.Join(ch.args, " "), err)
			if !recorded {
				c.recordTraffic(t, stage, "traffic", client)
				recorded = true
			}
		} else {
			t.Logf("%s: %s: podprobe %s: %s", stage, ch.what, strings.Join(ch.args, " "), strings.TrimSpace(out))
		}
	}
}

// recordTraffic keeps, when a traffic or names check failed, what names
// its cause and what a restart would lose (the export after it keeps only
// the logs of the pods' last run): the services' endpoints, the client
// node's resolv.conf and NAT rules (kube-proxy's service rules, the DNS
// rules step 10 wrote), the journal of our DNS forwarder there (empty on a
// node that runs none), and the logs of kube-proxy on that node and of
// CoreDNS. They go to the log dir as NAME-STAGE-CHECK.txt.
func (c *cluster) recordTraffic(t *testing.T, stage, check, node string) {
	t.Helper()
	var b strings.Builder
	add := func(what, out string, err error) {
		fmt.Fprintf(&b, "$ %s (error: %v)\n%s\n", what, err, out)
	}
	out, err := c.kubectl("", "get", "endpointslices", "-A", "-o", "wide")
	add("kubectl get endpointslices -A -o wide", out, err)
	for _, args := range [][]string{{"cat", "/etc/resolv.conf"}, {"iptables-save", "-t", "nat"}, {"ip6tables-save", "-t", "nat"},
		{"journalctl", "--no-pager", "-n", "100", "-u", network.ForwarderUnitName}} {
		out, err := c.cli(time.Minute, nil, append([]string{"exec", node}, args...)...)
		add(node+": "+strings.Join(args, " "), out, err)
	}
	proxy, err := c.kubectl("", "get", "pods", "-n", "kube-system", "-l", "k8s-app=kube-proxy",
		"--field-selector", "spec.nodeName="+node, "-o", "name")
	add("kube-proxy pod on "+node, proxy, err)
	for _, pod := range strings.Fields(proxy) {
		out, err := c.kubectl("", "logs", "-n", "kube-system", pod, "--tail", "200")
		add("kubectl logs "+pod, out, err)
	}
	out, err = c.kubectl("", "logs", "-n", "kube-system", "-l", "k8s-app=kube-dns", "--prefix", "--tail", "100")
	add("kubectl logs -l k8s-app=kube-dns", out, err)
	file := filepath.Join(c.logDir, c.name+"-"+stage+"-"+check+".txt")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Error(err)
		return
	}
	t.Logf("%s: the failed %s check's state: %s", stage, check, file)
}

// dockerDNSFamilies: the families in which a pod can have a node container's
// name answered, or why it cannot. CoreDNS forwards it to the node's
// resolv.conf, that is to Docker's embedded DNS at the IPv4 address step 10
// put there (or podman's aardvark-dns); it answers A and AAAA records. A pod
// of an IPv6 single-stack cluster has no IPv4 address to reach it from: it
// goes through the DNS forwarder our entrypoint runs on the node's IPv6
// address, which the script's node has not, so that path is the matrix's
// own check (checkDockerNames), with the script as its control.
// nerdctl has no DNS server: it writes the names into each container's
// /etc/hosts, which CoreDNS does not read.
func (c *cluster) dockerDNSFamilies() ([]family, string) {
	switch {
	case c.provider == "nerdctl":
		return nil, "nerdctl has no DNS server that knows them (only each container's /etc/hosts)"
	case c.family == "ipv6":
		return nil, "an ipv6 cluster's pods reach Docker's DNS only through our DNS forwarder: the matrix's names check (checkDockerNames) asks"
	case c.family == "dual":
		return []family{ipv4, ipv6}, ""
	}
	return []family{ipv4}, ""
}

const podManifest = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  nodeName: %s
  tolerations:
  - operator: Exists
  terminationGracePeriodSeconds: 1
  containers:
  - name: probe
    image: kind-entrypoint.test/podprobe:dev
    command: %s
`

// addrs: the container's addresses on its networks, IPv4 first.
func (c *cluster) addrs(t *testing.T, container string) []netip.Addr {
	t.Helper()
	format := "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{.GlobalIPv6Address}} {{end}}"
	if c.provider == "nerdctl" {
		// nerdctl (v1.7) lists as networks every interface that is up in
		// the container's network namespace, named unknown-IFACE: on a node
		// running pods, the CNI's veths too, each holding the pod network's
		// gateway (ptp). The node's own addresses are eth0's.
		format = `{{with index .NetworkSettings.Networks "unknown-eth0"}}{{.IPAddress}} {{.GlobalIPv6Address}}{{end}}`
	}
	out, err := c.cli(time.Minute, nil, "inspect", "-f", format, container)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []netip.Addr
	for _, f := range strings.Fields(out) {
		a, err := netip.ParseAddr(f)
		if err != nil {
			t.Fatalf("%s: address %q: %v", container, f, err)
		}
		addrs = append(addrs, a)
	}
	slices.SortStableFunc(addrs, func(a, b netip.Addr) int { return int(familyOf(a)) - int(familyOf(b)) })
	return addrs
}

// nodeAddr: the container's address of family f.
func (c *cluster) nodeAddr(t *testing.T, container string, f family) netip.Addr {
	t.Helper()
	addrs := c.addrs(t, container)
	for _, a := range addrs {
		if familyOf(a) == f {
			return a
		}
	}
	t.Fatalf("%s has no %v address (it has %v)", container, f, addrs)
	return netip.Addr{}
}

// restartWithNewIPs stops every node (and kind's load balancer, if any),
// lets throwaway containers take their addresses, and starts them again, so
// that each comes back with a new address in every family. The entrypoint
// must rewrite the old addresses in each control plane's files and have
// kubeadm renew the apiserver certificate for the new one. It returns when
// the nodes were started (see readySince); it does not wait for Kubernetes.
func (c *cluster) restartWithNewIPs(t *testing.T) time.Time {
	t.Helper()
	containers := slices.Clone(c.nodes)
	if c.lb != "" {
		containers = append(containers, c.lb)
	}
	old := c.stopAndHold(t, containers)
	started := time.Now()
	if _, err := c.cli(c.slow*3*time.Minute, nil, append([]string{"start"}, containers...)...); err != nil {
		t.Fatal(err)
	}
	now := c.requireNewAddrs(t, containers, old)
	// the entrypoint records the addresses it booted with
	for _, n := range c.nodes {
		for _, a := range now[n] {
			record := fmt.Sprintf("/kind/old-ipv%d", int(familyOf(a)))
			if err := c.eventually(time.Minute, func() error {
				rec, err := c.cli(time.Minute, nil, "exec", n, "cat", record)
				if err == nil {
					if got, perr := netip.ParseAddr(strings.TrimSpace(rec)); perr != nil || got != a {
						err = fmt.Errorf("%s is %q, want %s", record, rec, a)
					}
				}
				return err
			}); err != nil {
				t.Errorf("%s: %v", n, err)
			}
		}
	}
	const kubeletConf = "/etc/kubernetes/kubelet.conf"
	for _, cp := range c.nodes[:c.controlPlanes] {
		// the address kubeadm advertises: the primary family's; kind's
		// kubeadm.conf names the node's address in each family
		primary := c.nodeAddr(t, cp, c.families()[0])
		for _, f := range []string{"/etc/kubernetes/manifests/kube-apiserver.yaml", "/etc/kubernetes/manifests/etcd.yaml", "/kind/kubeadm.conf", kubeletConf} {
			text, err := c.cli(time.Minute, nil, "exec", cp, "cat", f)
			if err != nil {
				t.Errorf("%s: %s: %v", cp, f, err)
				continue
			}
			want := []netip.Addr{primary}
			if f == "/kind/kubeadm.conf" {
				want = nil
				for _, fam := range c.families() {
					want = append(want, c.nodeAddr(t, cp, fam))
				}
			}
			var stale, missing []netip.Addr
			for _, a := range old[cp] {
				if containsAddr(text, a) {
					stale = append(stale, a)
				}
			}
			for _, a := range want {
				if !containsAddr(text, a) {
					missing = append(missing, a)
				}
			}
			rewritten := len(stale) == 0 && len(missing) == 0
			switch {
			case f == kubeletConf && c.staleKubeletConf:
				if rewritten {
					t.Errorf("%s: %s: rewritten to %v, by a script that should not have", cp, f, want)
				} else {
					t.Logf("%s: %s still points at the old address %v", cp, f, stale)
				}
			case !rewritten:
				t.Errorf("%s: %s: old addresses %v still there, new %v missing", cp, f, stale, missing)
			}
		}
		if err := c.eventually(2*time.Minute, func() error { return c.certHasIP(cp, primary) }); err != nil {
			t.Errorf("%s: apiserver certificate: %v", cp, err)
		}
	}
	logs, _ := c.logs(time.Minute, c.cp())
	lines := tier.EntrypointLines(strings.ReplaceAll(logs, "\r", ""), "[certs]")
	t.Logf("%s: entrypoint log after the restart:\n%s", c.cp(), strings.Join(lines, "\n"))
	return started
}

// stopAndHold stops containers and returns the addresses they had. The
// engine hands out the lowest free address (in each family): one
// throwaway per stopped container holds those addresses, so the
// containers come back at new ones. (nerdctl's host-local IPAM hands out
// the one after the last it gave: new addresses either way.)
func (c *cluster) stopAndHold(t *testing.T, containers []string) map[string][]netip.Addr {
	t.Helper()
	old := map[string][]netip.Addr{}
	for _, n := range containers {
		old[n] = c.addrs(t, n)
	}
	stop := func() error {
		_, err := c.cli(c.slow*3*time.Minute, nil, append([]string{"stop"}, containers...)...)
		return err
	}
	if err := stop(); err != nil {
		if err := c.thawAndRetry(t, containers, err, stop); err != nil {
			t.Fatal(err)
		}
	}
	for range containers {
		if _, err := c.cli(c.slow*time.Minute, nil, "run", "-d", "--name", fmt.Sprintf("%s-throwaway%d", c.name, c.throwaways),
			"--label", c.prefix+"throwaway="+c.name, "--network", c.net,
			"--entrypoint", "/bin/sleep", c.image, "infinity"); err != nil {
			t.Fatal(err)
		}
		c.throwaways++
	}
	return old
}

// requireNewAddrs returns the containers' addresses once they started
// again, and fails the test unless each has as many as before (old), all
// new.
func (c *cluster) requireNewAddrs(t *testing.T, containers []string, old map[string][]netip.Addr) map[string][]netip.Addr {
	t.Helper()
	now := map[string][]netip.Addr{}
	for _, n := range containers {
		now[n] = c.addrs(t, n)
		for _, a := range now[n] {
			if slices.Contains(old[n], a) {
				t.Fatalf("%s kept its address %s across the restart (%v -> %v): the test did not change it", n, a, old[n], now[n])
			}
		}
		if len(now[n]) != len(old[n]) {
			t.Fatalf("%s: addresses %v before the restart, %v after", n, old[n], now[n])
		}
		t.Logf("%s: %v -> %v", n, old[n], now[n])
	}
	return now
}

// containsAddr: text holds a as a whole address: 172.18.0.3 is not in
// 172.18.0.30, fc00::3 not in fc00::31 (an IPv4 address may be followed by
// a port's colon; an IPv6 one, in brackets then).
func containsAddr(text string, a netip.Addr) bool {
	word := a.String()
	isAddrByte := func(b byte) bool {
		if b == '.' || ('0' <= b && b <= '9') {
			return true
		}
		return a.Is6() && (b == ':' || ('a' <= b && b <= 'f') || ('A' <= b && b <= 'F'))
	}
	for i := 0; ; {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		if (start == 0 || !isAddrByte(text[start-1])) && (end == len(text) || !isAddrByte(text[end])) {
			return true
		}
		i = start + 1
	}
}

// readySince waits until every node is Ready and each node restarted
// (every node, when none is named) has reported Ready since the time given
// (a kubelet heartbeat after the restart: the Ready the API holds from
// before the stop does not count), and returns how long that took. A node
// that kept running need not: its kubelet renews its lease, and writes
// its status only every 5 minutes (nodeStatusReportFrequency) when
// nothing changed.
func (c *cluster) readySince(t *testing.T, since time.Time, limit time.Duration, restarted ...string) time.Duration {
	t.Helper()
	err := c.eventually(limit, func() error {
		out, err := c.kubectl("", "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}{"\n"}{end}`)
		if err != nil {
			return err
		}
		ready, fresh := map[string]bool{}, map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			if len(f) != 3 || f[1] != "True" {
				continue
			}
			ready[f[0]] = true
			if beat, err := time.Parse(time.RFC3339, f[2]); err == nil && !beat.Before(since.Truncate(time.Second)) {
				fresh[f[0]] = true
			}
		}
		if len(restarted) == 0 {
			restarted = c.nodes
		}
		for _, n := range c.nodes {
			if !ready[n] {
				return fmt.Errorf("%s is not Ready:\n%s", n, out)
			}
		}
		for _, n := range restarted {
			if !fresh[n] {
				return fmt.Errorf("%s has not reported Ready since %s:\n%s", n, since.UTC().Format(time.RFC3339), out)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	took := time.Since(since)
	t.Logf("every node Ready %v after %s start", took.Round(time.Second), c.provider)
	return took
}

// certHasIP: the apiserver's serving certificate on node lists ip.
func (c *cluster) certHasIP(node string, ip netip.Addr) error {
	cert, err := c.nodeCert(node, "/etc/kubernetes/pki/apiserver.crt")
	if err != nil {
		return err
	}
	var sans []string
	for _, a := range cert.IPAddresses {
		if addr, ok := netip.AddrFromSlice(a); ok && addr.Unmap() == ip {
			return nil
		}
		sans = append(sans, a.String())
	}
	return fmt.Errorf("SANs %v (DNS %v) lack %s", sans, cert.DNSNames, ip)
}

// nodeCert is the first certificate of the PEM file at path in node.
func (c *cluster) nodeCert(node, path string) (*x509.Certificate, error) {
	text, err := c.cli(time.Minute, nil, "exec", node, "cat", path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, fmt.Errorf("%s: %s holds no PEM block", node, path)
	}
	return x509.ParseCertificate(block.Bytes)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func TestAnnouncedSnapshotter(t *testing.T) {
	for log, want := range map[string]string{
		"INFO: detected cgroup v2\n": "",
		"INFO: changing snapshotter from \"overlayfs\" to \"fuse-overlayfs\"\nINFO: enabling containerd-fuse-overlayfs service\n": "fuse-overlayfs",
		// two boots: the last one's
		"INFO: changing snapshotter from \"overlayfs\" to \"native\"\r\nINFO: changing snapshotter from \"overlayfs\" to \"fuse-overlayfs\"\r\n": "fuse-overlayfs",
	} {
		if got := announcedSnapshotter(log); got != want {
			t.Errorf("announcedSnapshotter(%q) = %q, want %q", log, got, want)
		}
	}
}

func TestContainsAddr(t *testing.T) {
	for _, tc := range []struct {
		text, addr string
		want       bool
	}{
		{"--advertise-address=172.18.0.3\n", "172.18.0.3", true},
		{"--advertise-address=172.18.0.30\n", "172.18.0.3", false},
		{"server: https://172.18.0.3:6443", "172.18.0.3", true},
		{"x 172.18.0.30 and 172.18.0.3", "172.18.0.3", true},
		{"1172.18.0.3", "172.18.0.3", false},
		{"https://[fc00:f853:ccd:e793::3]:6443", "fc00:f853:ccd:e793::3", true},
		{"fc00:f853:ccd:e793::31", "fc00:f853:ccd:e793::3", false},
		{"node-ip: 172.18.0.3,fc00:f853:ccd:e793::3", "fc00:f853:ccd:e793::3", true},
		{"", "172.18.0.3", false},
	} {
		if got := containsAddr(tc.text, netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("containsAddr(%q, %s) = %v, want %v", tc.text, tc.addr, got, tc.want)
		}
	}
}

// TestPause: eventually's pause is slow×2 s after a quick try, as long as
// the try after a slow one, and never past the deadline.
func TestPause(t *testing.T) {
	for _, tc := range []struct {
		slow, took, left, want time.Duration
	}{
		{1, time.Second, time.Hour, 2 * time.Second},
		{4, time.Second, time.Hour, 8 * time.Second},
		{4, 8 * time.Second, time.Hour, 8 * time.Second},
		{4, 30 * time.Second, time.Hour, 30 * time.Second},
		{4, 30 * time.Second, 5 * time.Second, 5 * time.Second},
		{1, 0, time.Second, time.Second},
	} {
		if got := pause(tc.slow, tc.took, tc.left); got != tc.want {
			t.Errorf("pause(slow %d, took %v, left %v) = %v, want %v", tc.slow, tc.took, tc.left, got, tc.want)
		}
	}
}

// TestClusterOutOfTime: a cluster's calls keep to c.end, so that its
// cleanup runs before the test's -test.timeout. A wait whose own limit is
// an hour stops at c.end with the reason; past c.end, the engine and kind
// are not run at all.
func TestClusterOutOfTime(t *testing.T) {
	c := &cluster{engine: "true", kind: "true", slow: 1}
	if got, err := c.within(time.Hour); got != time.Hour || err != nil {
		t.Errorf("no end: within(1h) = %v, %v; want 1h, nil", got, err)
	}
	c.end = time.Now().Add(time.Second)
	if got, err := c.within(time.Hour); got > time.Second || err != nil {
		t.Errorf("end in 1 s: within(1h) = %v, %v; want at most 1s, nil", got, err)
	}
	tries := 0
	err := c.eventually(time.Hour, func() error {
		tries++
		if _, err := c.cli(time.Hour, nil); err != nil {
			return err
		}
		return errors.New("not yet")
	})
	if err == nil || !strings.Contains(err.Error(), "out of time") {
		t.Errorf("eventually(1h) past c.end = %v, want out of time", err)
	}
	if time.Now().Before(c.end) || time.Since(c.end) > time.Minute {
		t.Errorf("eventually(1h) returned %v after c.end, want at c.end", time.Since(c.end))
	}
	if tries < 2 {
		t.Errorf("eventually tried %d times, want the tries before c.end and one after", tries)
	}
	if out, err := c.kindCmd(time.Hour, "get", "clusters"); err == nil || !strings.Contains(err.Error(), "kind get: out of time") {
		t.Errorf("kindCmd past c.end = %q, %v; want out of time", out, err)
	}
	if out, err := c.logs(time.Hour, "x"); err == nil || !strings.Contains(err.Error(), "out of time") {
		t.Errorf("logs past c.end = %q, %v; want out of time", out, err)
	}
	// past c.end, remove still has until c.hardEnd: kind delete, the
	// throwaways' listing and the network's removal run (and pass: both
	// commands are true), where c.end alone would fail them
	c.hardEnd = time.Now().Add(time.Minute)
	c.remove(t)

	// setDeadline: the test's deadline less 30 s for remove's calls, less
	// slow×2 min more for the test's own
	d := &cluster{slow: 4}
	d.setDeadline(t)
	if deadline, ok := t.Deadline(); ok {
		if want := deadline.Add(-30 * time.Second); !d.hardEnd.Equal(want) {
			t.Errorf("hardEnd = %v, want %v", d.hardEnd, want)
		}
		if want := deadline.Add(-30*time.Second - 8*time.Minute); !d.end.Equal(want) {
			t.Errorf("end = %v, want %v", d.end, want)
		}
	} else if !d.end.IsZero() || !d.hardEnd.IsZero() {
		t.Errorf("no deadline: end %v, hardEnd %v; want both zero", d.end, d.hardEnd)
	}
}

// TestRecordTraffic: a failed check (here the names check) leaves, in the
// log dir as NAME-STAGE-CHECK.txt, each thing recordTraffic names, from the
// client node and through kubectl, with kube-proxy's log from the pod on
// that node. The engine is a script that answers like one; it names a
// kube-proxy pod only when asked for that node's.
func TestRecordTraffic(t *testing.T) {
	dir := t.TempDir()
	engine := filepath.Join(dir, "engine")
	script := `#!/bin/sh
case "$*" in
*"get pods -n kube-system -l k8s-app=kube-proxy --field-selector spec.nodeName=c1-worker -o name") echo pod/kube-proxy-abcde ;;
*) echo "ran: $*" ;;
esac
`
	if err := os.WriteFile(engine, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &cluster{engine: engine, slow: 1, name: "c1", logDir: dir, nodes: []string{"c1-control-plane", "c1-worker"}}
	c.recordTraffic(t, "before-restart", "names", "c1-worker")
	b, err := os.ReadFile(filepath.Join(dir, "c1-before-restart-names.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ran: exec c1-control-plane kubectl --kubeconfig=/etc/kubernetes/admin.conf get endpointslices -A -o wide",
		"ran: exec c1-worker cat /etc/resolv.conf",
		"ran: exec c1-worker iptables-save -t nat",
		"ran: exec c1-worker ip6tables-save -t nat",
		"ran: exec c1-worker journalctl --no-pager -n 100 -u kind-dns-forwarder.service",
		"ran: exec c1-control-plane kubectl --kubeconfig=/etc/kubernetes/admin.conf logs -n kube-system pod/kube-proxy-abcde --tail 200",
		"logs -n kube-system -l k8s-app=kube-dns --prefix --tail 100",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the record has no %q:\n%s", want, b)
		}
	}
}

// TestAPIUnreachable: the failures kubectl reports when its request never
// reached the API server are made again; a refusal by the server, or a
// probe's own failure inside an exec, is not.
func TestAPIUnreachable(t *testing.T) {
	for _, tc := range []struct {
		err  string
		want bool
	}{
		{"exit status 1: Unable to connect to the server: net/http: TLS handshake timeout", true},
		{`exit status 1: error: error validating "STDIN": error validating data: failed to download openapi: Get "https://kind-ep-cl-dual-ours-21166-control-plane:6443/openapi/v2?timeout=32s": net/http: TLS handshake timeout; if you choose to ignore these errors, turn validation off with --validate=false`, true},
		{`exit status 1: Error from server (NotFound): pods "probe-client" not found`, false},
		{"exit status 1: podprobe: lookup kubernetes.default.svc.cluster.local on 10.96.0.10:53: dial udp 10.96.0.10:53: i/o timeout", false},
		{`exit status 1: error: Get "https://kind-ep-cl-dual-ours-31647-control-plane:6443/api/v1/namespaces/kube-system/pods?limit=500": dial tcp 172.19.0.3:6443: connect: connection refused - error from a previous attempt: read tcp 172.19.0.3:53954->172.19.0.3:6443: read: connection reset by peer`, true},
		{"exit status 1: The connection to the server kind-control-plane:6443 was refused - did you specify the right host or port?", true},
		{`exit status 1: podprobe: Get "http://10.244.0.2:8080/": dial tcp 10.244.0.2:8080: connect: connection refused`, false},
	} {
		if got := apiUnreachable(errors.New(tc.err)); got != tc.want {
			t.Errorf("apiUnreachable(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
