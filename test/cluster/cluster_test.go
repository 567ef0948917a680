//go:build cluster

// The cluster tier: real Kubernetes (kubeadm, kubelet, containerd, CoreDNS,
// kube-proxy, a CNI) on nodes booted by the entrypoint, created by the real
// kind CLI. test/cluster/run.sh builds the images and runs these tests.
package cluster

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

const namePrefix = "kind-ep-cl-" // run.sh and cleanup find leftovers by it

// The providers a cluster is made with: kind's default, Docker, or nerdctl
// (KIND_EXPERIMENTAL_PROVIDER=nerdctl; test/nerdctl/run.sh, nerdctl_test.go).
const (
	providerDocker  = ""
	providerNerdctl = "nerdctl"
)

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
	// test/nerdctl/run.sh: the nerdctl CLI kind runs, and the prefix of
	// every name its tests give
	envNerdctl       = "NERDCTL_CLI"
	envNerdctlPrefix = "NERDCTL_NAME_PREFIX"
)

// engine runs the provider's CLI (docker, nerdctl) with a fixed argv and
// a timeout.
func (c *cluster) engine(timeout time.Duration, stdin []byte, args ...string) (string, error) {
	return tier.Run(timeout, stdin, c.cli, args...)
}

func mustEnv(t *testing.T, key string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		t.Fatal(key + " is not set: run test/cluster/run.sh (make e2e-cluster)")
	}
	return v
}

// TestOurNodes: a 1+1 cluster from our image, created by the kind release
// made for this Kubernetes; checked, restarted with new IPs, checked again.
func TestOurNodes(t *testing.T) {
	c := createCluster(t, spec{tag: "ours", image: mustEnv(t, envImage), kind: mustEnv(t, envKind), worker: true})
	c.checkAll(t, "before-restart")
	c.restartWithNewIPs(t)
	c.checkAll(t, "after-restart")
}

// TestReferenceScript is the control run: the same tier with kind's own
// script as the node image's entrypoint, from the kind release made for this
// Kubernetes. It is SPEC.md's reference: v0.23.0's script plus the one later
// change, kubelet.conf among the files an IP change rewrites. Where this
// fails too, the fault is the recipe's.
func TestReferenceScript(t *testing.T) {
	c := createCluster(t, spec{tag: "ref", image: mustEnv(t, envReferenceImage), kind: mustEnv(t, envKind), worker: true})
	c.checkAll(t, "before-restart")
	c.restartWithNewIPs(t)
	c.checkAll(t, "after-restart")
}

// TestReferenceScriptV023: kind v0.23.0's script, before that change. Since
// kubeadm points a control plane's kubelet.conf at the node's own address,
// its restart with a new IP leaves the kubelet talking to the old one. The
// test shows that, which is why the entrypoint rewrites kubelet.conf.
func TestReferenceScriptV023(t *testing.T) {
	c := createCluster(t, spec{tag: "ref023", image: mustEnv(t, envReferenceOldImage), kind: mustEnv(t, envKind), worker: true})
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
	worker           bool // one worker besides the control plane
	// slow stretches every time limit of the checks (0 or 1: as on this
	// host); the VM's cluster suite runs under emulation
	slow int
	// kubeadmPatches go into kind's config as kubeadmConfigPatches
	kubeadmPatches []string
	// provider: providerDocker or providerNerdctl
	provider string
}

type cluster struct {
	name, image, kind string
	provider          string
	cli               string // the provider's CLI: docker, or the nerdctl kind runs
	prefix            string // of every name the test gives (cleanup finds leftovers by it)
	net               string
	logDir            string
	slow              time.Duration // a factor: see spec.slow
	nodes             []string      // control plane first
	env               []string
	// staleKubeletConf: the node's script leaves the old address in the
	// control plane's kubelet.conf (kind v0.23.0's)
	staleKubeletConf bool
}

func (c *cluster) cp() string { return c.nodes[0] }

// createCluster runs `kind create cluster --wait` for one control plane and,
// with worker, one worker, and removes all it made when the test ends,
// exporting the node logs first if the test failed.
func createCluster(t *testing.T, s spec) *cluster {
	t.Helper()
	c := &cluster{image: s.image, kind: s.kind, provider: s.provider, cli: "docker", prefix: namePrefix,
		logDir: mustEnv(t, envLogDir), slow: time.Duration(max(s.slow, 1))}
	if s.provider == providerNerdctl {
		c.cli, c.prefix = mustEnv(t, envNerdctl), mustEnv(t, envNerdctlPrefix)
	}
	id := fmt.Sprintf("%s%s-%d", c.prefix, s.tag, time.Now().Unix()%100000)
	c.name, c.net = id, id+"-net"
	c.nodes = []string{id + "-control-plane"}
	cfg := "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n"
	if s.worker {
		c.nodes = append(c.nodes, id+"-worker")
		cfg += "- role: worker\n"
	}
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
	if s.provider == providerNerdctl {
		// kind's nerdctl provider runs `nerdctl` from PATH, on its fixed
		// network "kind": in the tier's own CNI configuration directory
		// (NERDCTL_TOML, set by run.sh), which nothing else uses.
		c.net = "kind"
		c.env = append(os.Environ(), "KIND_EXPERIMENTAL_PROVIDER=nerdctl",
			"PATH="+filepath.Dir(c.cli)+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	t.Cleanup(func() { c.remove(t) })

	start := time.Now()
	out, err := c.kindCmd(c.slow*10*time.Minute, "create", "cluster", "--name", c.name, "--image", s.image,
		"--config", cfgFile, "--retain", "--wait", (c.slow * 5 * time.Minute).String())
	t.Logf("%s create cluster --image %s (%v):\n%s", s.kind, s.image, time.Since(start).Round(time.Second), out)
	if err != nil {
		t.Fatalf("kind create cluster: %v", err)
	}
	return c
}

func (c *cluster) kindCmd(timeout time.Duration, args ...string) (string, error) {
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
// failure it first exports the node logs and prints the entrypoint's lines.
func (c *cluster) remove(t *testing.T) {
	if t.Failed() {
		dir := filepath.Join(c.logDir, c.name)
		out, err := c.kindCmd(c.slow*5*time.Minute, "export", "logs", dir, "--name", c.name)
		t.Logf("kind export logs %s: %v\n%s", dir, err, lastLines(out, 5))
		for _, n := range c.nodes {
			logs, _ := tier.Logs(time.Minute, c.cli, "--tail", "80", n)
			t.Logf("=== %s: %s logs\n%s", n, c.cli, strings.ReplaceAll(logs, "\r", ""))
			failed, _ := c.engine(time.Minute, nil, "exec", n, "systemctl", "--failed", "--no-pager")
			t.Logf("=== %s: failed units\n%s", n, failed)
			kubelet, _ := c.engine(time.Minute, nil, "exec", n, "journalctl", "-u", "kubelet", "--no-pager", "-n", "40")
			t.Logf("=== %s: kubelet\n%s", n, kubelet)
		}
	}
	if out, err := c.kindCmd(c.slow*5*time.Minute, "delete", "cluster", "--name", c.name); err != nil {
		t.Errorf("kind delete cluster: %v\n%s", err, out)
	}
	if ids, _ := c.engine(time.Minute, nil, "ps", "-aq", "--filter", "label="+c.prefix+"throwaway="+c.name); strings.TrimSpace(ids) != "" {
		args := append([]string{"rm", "-f", "-v"}, strings.Fields(ids)...)
		if _, err := c.engine(time.Minute, nil, args...); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	if _, err := c.engine(time.Minute, nil, "network", "rm", c.net); err != nil && !strings.Contains(err.Error(), "No such network") && !strings.Contains(err.Error(), "not found") {
		t.Errorf("cleanup: %v", err)
	}
}

// kubectl runs kubectl on the control-plane node with its admin kubeconfig.
func (c *cluster) kubectl(stdin string, args ...string) (string, error) {
	argv := []string{"exec"}
	var in []byte
	if stdin != "" {
		argv = append(argv, "-i")
		in = []byte(stdin)
	}
	argv = append(argv, c.cp(), "kubectl", "--kubeconfig=/etc/kubernetes/admin.conf")
	return c.engine(c.slow*2*time.Minute, in, append(argv, args...)...)
}

// eventually retries f every 2 s until it succeeds or limit passes, and
// returns its last error.
func eventually(limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(2 * time.Second)
	}
}

// checkAll: every node Ready, every kube-system pod Running and ready, then
// DNS and pod-to-pod traffic. The cluster's state goes to the log and to
// CLUSTER_LOG_DIR/NAME-STAGE.txt.
func (c *cluster) checkAll(t *testing.T, stage string) {
	t.Helper()
	start := time.Now()
	if err := eventually(c.slow*5*time.Minute, c.nodesReady); err != nil {
		t.Fatalf("%s: nodes: %v", stage, err)
	}
	if err := eventually(c.slow*5*time.Minute, c.systemPodsRunning); err != nil {
		t.Fatalf("%s: kube-system pods: %v", stage, err)
	}
	t.Logf("%s: nodes Ready and kube-system pods Running after %v", stage, time.Since(start).Round(time.Second))
	c.recordState(t, stage)
	c.checkTraffic(t, stage)
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
	if want := 4 + 2 + 2*len(c.nodes); len(lines) < want {
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
}

// checkTraffic: a pod on the last node (the worker, when there is one)
// resolves the cluster's own service name, which CoreDNS answers, and a
// node container's name, which CoreDNS forwards to the node's resolv.conf
// and so to Docker's embedded DNS through the rules step 10 rewrote; it also
// reaches a pod on the control plane over the pod network. Under nerdctl no
// DNS server knows the containers' names (nerdctl writes them into each
// node's /etc/hosts, which CoreDNS does not read): that check is Docker's
// only, and nerdctl_test.go checks the nodes' /etc/hosts instead.
func (c *cluster) checkTraffic(t *testing.T, stage string) {
	t.Helper()
	client, server := c.nodes[len(c.nodes)-1], c.cp()
	manifest := fmt.Sprintf(podManifest, "probe-server", server, `["/podprobe", "serve", ":8080"]`) +
		"---\n" + fmt.Sprintf(podManifest, "probe-client", client, `["/podprobe"]`)
	if out, err := c.kubectl(manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("%s: apply probe pods: %v\n%s", stage, err, out)
	}
	if out, err := c.kubectl("", "wait", "--for=condition=Ready", "pod/probe-server", "pod/probe-client", "--timeout="+(c.slow*3*time.Minute).String()); err != nil {
		desc, _ := c.kubectl("", "describe", "pod", "probe-server", "probe-client")
		t.Fatalf("%s: probe pods not Ready: %v\n%s\n%s", stage, err, out, desc)
	}
	serverIP, err := c.kubectl("", "get", "pod", "probe-server", "-o", "jsonpath={.status.podIP}")
	if err != nil {
		t.Fatal(err)
	}
	cpIP := c.nodeIP(t, c.cp())
	exec := func(args ...string) (string, error) {
		return c.kubectl("", append([]string{"exec", "probe-client", "--", "/podprobe"}, args...)...)
	}
	type check struct {
		what string
		args []string
		want string
	}
	checks := []check{
		{"the kubernetes service's name", []string{"resolve", "kubernetes.default.svc.cluster.local"}, "10.96.0.1"},
		{"a pod on " + server + " from " + client, []string{"get", "http://" + serverIP + ":8080/"}, "probe-server"},
	}
	if c.provider == providerDocker {
		checks = append(checks, check{"the control-plane node's container name (Docker's DNS)", []string{"resolve", c.cp()}, cpIP.String()})
	}
	for _, check := range checks {
		var out string
		err := eventually(c.slow*time.Minute, func() error {
			var err error
			out, err = exec(check.args...)
			if err == nil && !strings.Contains(out, check.want) {
				err = fmt.Errorf("got %q, want %q in it", strings.TrimSpace(out), check.want)
			}
			return err
		})
		if err != nil {
			t.Errorf("%s: %s: podprobe %s: %v", stage, check.what, strings.Join(check.args, " "), err)
		} else {
			t.Logf("%s: %s: podprobe %s: %s", stage, check.what, strings.Join(check.args, " "), strings.TrimSpace(out))
		}
	}
	if out, err := c.kubectl("", "delete", "pod", "probe-server", "probe-client", "--grace-period=1", "--wait=true"); err != nil {
		t.Errorf("%s: delete probe pods: %v\n%s", stage, err, out)
	}
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

func (c *cluster) nodeIP(t *testing.T, node string) netip.Addr {
	t.Helper()
	out, err := c.engine(time.Minute, nil, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", node)
	if err != nil {
		t.Fatal(err)
	}
	a, err := netip.ParseAddr(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("%s: IP %q: %v", node, out, err)
	}
	return a
}

// restartWithNewIPs stops every node, lets throwaway containers take their
// addresses, and starts the nodes again, so that each comes back with a new
// IP. The entrypoint must rewrite the old address in the control plane's
// files and have kubeadm renew the apiserver certificate for the new one.
func (c *cluster) restartWithNewIPs(t *testing.T) {
	t.Helper()
	old := map[string]netip.Addr{}
	for _, n := range c.nodes {
		old[n] = c.nodeIP(t, n)
	}
	if _, err := c.engine(3*time.Minute, nil, append([]string{"stop"}, c.nodes...)...); err != nil {
		t.Fatal(err)
	}
	// Docker hands out the lowest free address: one throwaway per node holds
	// the addresses the nodes had. (nerdctl's host-local IPAM hands out the
	// next address after the last one it gave: the nodes get new ones
	// either way.)
	for i := range c.nodes {
		if _, err := c.engine(time.Minute, nil, "run", "-d", "--name", fmt.Sprintf("%s-throwaway%d", c.name, i),
			"--label", c.prefix+"throwaway="+c.name, "--network", c.net,
			"--entrypoint", "/bin/sleep", c.image, "infinity"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.engine(3*time.Minute, nil, append([]string{"start"}, c.nodes...)...); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		now := c.nodeIP(t, n)
		if now == old[n] {
			t.Fatalf("%s kept its address %s across the restart: the test did not change it", n, now)
		}
		t.Logf("%s: %s -> %s", n, old[n], now)
		// the entrypoint records the address it booted with
		if err := eventually(time.Minute, func() error {
			rec, err := c.engine(time.Minute, nil, "exec", n, "cat", "/kind/old-ipv4")
			if err == nil && strings.TrimSpace(rec) != now.String() {
				err = fmt.Errorf("/kind/old-ipv4 is %q, want %s", rec, now)
			}
			return err
		}); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	cp := c.cp()
	newIP := c.nodeIP(t, cp)
	const kubeletConf = "/etc/kubernetes/kubelet.conf"
	for _, f := range []string{"/etc/kubernetes/manifests/kube-apiserver.yaml", "/etc/kubernetes/manifests/etcd.yaml", "/kind/kubeadm.conf", kubeletConf} {
		text, err := c.engine(time.Minute, nil, "exec", cp, "cat", f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		rewritten := !strings.Contains(text, old[cp].String()) && strings.Contains(text, newIP.String())
		switch {
		case f == kubeletConf && c.staleKubeletConf:
			if rewritten {
				t.Errorf("%s: rewritten to %s, by a script that should not have", f, newIP)
			} else {
				t.Logf("%s still points at the old address %s", f, old[cp])
			}
		case !rewritten:
			t.Errorf("%s: the old address %s is still there, or the new %s is not", f, old[cp], newIP)
		}
	}
	if err := eventually(2*time.Minute, func() error { return c.certHasIP(cp, newIP) }); err != nil {
		t.Errorf("apiserver certificate: %v", err)
	}
	logs, _ := tier.Logs(time.Minute, c.cli, cp)
	t.Logf("%s: entrypoint log after the restart:\n%s", cp, entrypointLines(logs))
}

// certHasIP: the apiserver's serving certificate on node lists ip.
func (c *cluster) certHasIP(node string, ip netip.Addr) error {
	text, err := c.engine(time.Minute, nil, "exec", node, "cat", "/etc/kubernetes/pki/apiserver.crt")
	if err != nil {
		return err
	}
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return fmt.Errorf("apiserver.crt holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
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

// entrypointLines keeps the INFO/WARN/ERROR lines of the last boot.
func entrypointLines(logs string) string {
	var keep []string
	for _, l := range strings.Split(strings.ReplaceAll(logs, "\r", ""), "\n") {
		if strings.HasPrefix(l, "INFO: ") || strings.HasPrefix(l, "WARN: ") || strings.HasPrefix(l, "ERROR: ") || strings.HasPrefix(l, "[certs]") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
