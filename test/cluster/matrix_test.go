//go:build cluster && matrix

package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/bench/bootlog"
)

// matrixPrefix starts every name the matrix makes (matrix.sh removes
// leftovers by it); the cluster tier's run.sh removes kind-ep-cl-* at its
// start, which must not take a matrix run's clusters with it.
const matrixPrefix = "kind-ep-mx-"

// The podman shape's images: the cluster tier's images as podman's store
// names them once matrix.sh has loaded them.
const (
	envPodmanImage          = "CLUSTER_PODMAN_IMAGE"
	envPodmanReferenceImage = "CLUSTER_PODMAN_REFERENCE_IMAGE"
)

// The ha shape's load balancer (run.sh): kind v0.33 moved it from haproxy,
// which run.sh builds, to envoy, which it cannot. CLUSTER_KIND_HA is the
// kind CLI of an earlier release (haproxy) that creates the ha shape's
// clusters instead; CLUSTER_MATRIX_NO_HA, when there is none, says why the
// ha shape does not run, and the table says so in its row.
const (
	envKindHA = "CLUSTER_KIND_HA"
	envNoHA   = "CLUSTER_MATRIX_NO_HA"
)

// shape is one row pair of the matrix: the cluster shapes kind's own CI and
// users run.
type shape struct {
	name                   string
	family                 string // kind's ipFamily ("" is ipv4)
	engine                 string // "" is docker
	controlPlanes, workers int
	// ha: checked after every restart, then restarted in reverse order
	// and one control plane alone (kind#1689: see haRestarts)
	ha bool
	// snapshot: an ha shape whose cluster also goes through the snapshot
	// stage unless CLUSTER_MATRIX_HA_SNAPSHOT says otherwise (haPlan)
	snapshot bool
}

func (s shape) nodes() string {
	return fmt.Sprintf("%d+%d", max(s.controlPlanes, 1), s.workers)
}

// shapes, in the order they run: the families first, whose pods no other
// test covers; HA, whose restart may not come back, after the IPv4 shape.
var shapes = []shape{
	{name: "ipv6", family: "ipv6", workers: 1},
	{name: "dual", family: "dual", workers: 1},
	{name: "ipv4", workers: 2}, // kind CI's shape
	{name: "ha", controlPlanes: 3, workers: 1, ha: true, snapshot: true},
	// with the CoreDNS change of the ipv6 shape; its etcd peers and the
	// redirects are IPv6
	{name: "ha-ipv6", family: "ipv6", controlPlanes: 3, workers: 1, ha: true},
	{name: "podman", engine: "podman", workers: 1},
}

// restartLimit: how long every node may take to report Ready after a
// restart (about a minute is usual here).
const restartLimit = 3 * time.Minute

// result is one row of the table: each stage's outcome and the times.
type result struct {
	shape                                shape
	image                                string // ours or script
	create, checks, restart, checksAfter string // pass, FAIL, or - (not run)
	// names, namesAfter: checkDockerNames before and after the restart
	// (Docker's shapes; - in podman's)
	names, namesAfter         string
	createTimes, restartTimes []time.Duration
	// more: the ha shapes' further stages (haRestarts): "reverse
	// pass|FAIL, one K/N (Ready in ...)[, snapshot pass|FAIL]"; -
	// elsewhere
	more string
}

// newResult: the row of image in shape before anything ran (every column
// "-").
func newResult(sh shape, image string) *result {
	return &result{shape: sh, image: image, create: "-", checks: "-", restart: "-", checksAfter: "-", names: "-", namesAfter: "-", more: "-"}
}

// namesChecked: the shapes whose pods must have names only Docker's DNS
// knows answered (checkDockerNames): Docker's, not podman's. In ipv6 our
// image passes it through the node's DNS forwarder and the script's fails
// it (the control: kind#4152, kind#3114); in dual and ipv4 both pass on
// Docker's iptables backend, and on Docker 29's nftables backend only ours
// does (test/docker29: the script restores no rule there).
func namesChecked(sh shape) bool { return sh.engine == "" }

// TestMatrix: every shape, from our image and from the control image with
// kind's own script (the release in versions), with that release's CLI:
// created (time to every node Ready), checked (checkAll), restarted with new
// addresses in every family (time from docker start to every node Ready,
// and the rewritten files and the certificate checked), checked again, then
// restarted twice more for the median of the restart time. The table goes
// to the log and to CLUSTER_LOG_DIR/matrix.md. One row pair at a time:
// go test -run 'TestMatrix/ipv6/'.
func TestMatrix(t *testing.T) {
	// how many clusters of each shape each image creates, for the median of
	// the create time (the first one is checked and restarted), and how
	// many times that one restarts, for the median of the restart time
	// (0 restarts: no checks either, the create times only)
	creates, restarts := envCount(t, "CLUSTER_MATRIX_CREATES", 1, 3), envCount(t, "CLUSTER_MATRIX_RESTARTS", 0, 3)
	haSingle, haSnapshot := envCount(t, envHASingle, 1, 3), os.Getenv(envHASnapshot)
	kind := mustEnv(t, envKind)
	var results []*result
	t.Cleanup(func() { writeTable(t, results) })
	for _, sh := range shapes {
		kind := kind
		if sh.ha {
			if why := os.Getenv(envNoHA); why != "" {
				t.Logf("%s: not run: %s", sh.name, why)
				r := newResult(sh, "both")
				r.create = "not run: " + why
				results = append(results, r)
				continue
			}
			if k := os.Getenv(envKindHA); k != "" {
				t.Logf("%s: created by %s (%s)", sh.name, k, envKindHA)
				kind = k
			}
		}
		images := [][2]string{{"ours", envImage}, {"script", envReferenceImage}}
		if sh.engine == "podman" {
			images = [][2]string{{"ours", envPodmanImage}, {"script", envPodmanReferenceImage}}
		}
		for _, im := range images {
			r := newResult(sh, im[0])
			base := spec{image: os.Getenv(im[1]), kind: kind, prefix: matrixPrefix, family: sh.family,
				engine: sh.engine, controlPlanes: sh.controlPlanes, workers: sh.workers}
			plan := newHAPlan(t, sh, haSingle, haSnapshot)
			if plan.snapshot {
				base.kubeadmPatches = append(base.kubeadmPatches, snapshotPatch)
			}
			name := sh.name + "/" + im[0]
			if !t.Run(name, func(t *testing.T) {
				if base.image == "" {
					t.Fatalf("%s is not set: run test/cluster/matrix.sh (make e2e-cluster-matrix)", im[1])
				}
				results = append(results, r)
				runShape(t, base, sh, r, restarts, plan)
			}) {
				continue
			}
			for i := 2; i <= creates; i++ {
				t.Run(fmt.Sprintf("%s/create%d", name, i), func(t *testing.T) {
					s := base
					s.tag = fmt.Sprintf("%s-%s-c%d", sh.name, im[0], i)
					c := createCluster(t, s)
					r.createTimes = append(r.createTimes, c.createTime)
				})
			}
		}
	}
}

// runShape creates, checks and restarts one cluster, filling in r as it
// goes: a stage that fails stays FAIL, one not reached stays -.
func runShape(t *testing.T, s spec, sh shape, r *result, restarts int, plan haPlan) {
	s.tag = sh.name + "-" + r.image
	r.create = "FAIL"
	c := createCluster(t, s)
	r.create = "pass"
	r.createTimes = append(r.createTimes, c.createTime)
	if restarts == 0 { // the create times only: the rest of the row stays -
		return
	}
	if c.family == "ipv6" {
		c.coreDNSForIPv6(t)
	}
	r.checks = passed(t.Run("checks", func(t *testing.T) {
		c.checkAll(t, "before-restart")
		if sh.ha {
			c.checkPeerCerts(t, "before-restart")
		}
	}))
	if sh.ha {
		c.recordEtcd(t, "before-restart")
	}
	var dnsOnly string
	if namesChecked(sh) {
		dnsOnly = c.startDNSOnly(t)
		r.names = passed(t.Run("docker-names", func(t *testing.T) { c.checkDockerNames(t, "before-restart", dnsOnly) }))
	}
	// every stage runs even when one before it failed, as far as the
	// cluster allows: what comes back after a restart is the point
	r.restart = passed(t.Run("restart", func(t *testing.T) {
		r.restartTimes = append(r.restartTimes, c.readySince(t, c.restartWithNewIPs(t), restartLimit))
	}))
	if r.restart != "pass" {
		return
	}
	r.checksAfter = passed(t.Run("checks-after-restart", func(t *testing.T) {
		c.checkAll(t, "after-restart")
		if sh.ha {
			c.checkPeerCerts(t, "after-restart")
		}
	}))
	if sh.ha {
		c.recordEtcd(t, "after-restart")
	}
	if dnsOnly != "" {
		r.namesAfter = passed(t.Run("docker-names-after-restart", func(t *testing.T) { c.checkDockerNames(t, "after-restart", dnsOnly) }))
	}
	for i := 2; i <= restarts; i++ {
		if !t.Run(fmt.Sprintf("restart%d", i), func(t *testing.T) {
			r.restartTimes = append(r.restartTimes, c.readySince(t, c.restartWithNewIPs(t), restartLimit))
			if sh.ha { // every check again, after every restart
				stage := fmt.Sprintf("after-restart%d", i)
				c.checkAll(t, stage)
				c.checkPeerCerts(t, stage)
				c.recordEtcd(t, stage)
			}
		}) {
			r.restart = fmt.Sprintf("FAIL at restart %d", i)
			return
		}
	}
	if sh.ha {
		r.more = c.haRestarts(t, plan)
	}
}

// envCount is the whole number from least up in the environment variable
// name, or def when it is not set.
func envCount(t *testing.T, name string, least, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		t.Fatalf("%s=%q: want a whole number from %d", name, v, least)
	}
	return n
}

func passed(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

// coreDNSForIPv6 makes the change to CoreDNS that kind's CI makes for IPv6
// clusters (hack/ci/e2e-k8s.sh) but one: NXDOMAIN rather than SERVFAIL for
// the "internal" domains of the search path, and no loop detection; the
// forward to the node's resolv.conf stays (kind's CI drops it, as IPv6-only
// pods could not reach Docker's DNS), for checkDockerNames goes through it.
// Then it restarts CoreDNS with it.
func (c *cluster) coreDNSForIPv6(t *testing.T) {
	t.Helper()
	corefile, err := c.kubectl("", "get", "configmap", "coredns", "-n", "kube-system", "-o", "jsonpath={.data.Corefile}")
	if err != nil {
		t.Fatal(err)
	}
	patched := ipv6Corefile(corefile)
	patch, err := json.Marshal(map[string]map[string]string{"data": {"Corefile": patched}})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.kubectl("", "patch", "configmap", "coredns", "-n", "kube-system", "--type=merge", "-p", string(patch)); err != nil {
		t.Fatalf("patch CoreDNS: %v\n%s", err, out)
	}
	if out, err := c.kubectl("", "rollout", "restart", "deployment/coredns", "-n", "kube-system"); err != nil {
		t.Fatalf("restart CoreDNS: %v\n%s", err, out)
	}
	if out, err := c.kubectl("", "rollout", "status", "deployment/coredns", "-n", "kube-system", "--timeout=3m"); err != nil {
		t.Fatalf("CoreDNS rollout: %v\n%s", err, out)
	}
	t.Logf("CoreDNS as kind's IPv6 CI has it, the forward kept:\n%s", patched)
}

// ipv6Corefile is e2e-k8s.sh's sed on the Corefile but for the forward
// line: "internal" joins the kubernetes plugin's zones, and the upstream,
// fallthrough and loop lines go.
func ipv6Corefile(corefile string) string {
	var out []string
	for _, l := range strings.Split(corefile, "\n") {
		switch {
		case strings.HasSuffix(l, "upstream"), strings.Contains(l, "fallthrough"), strings.HasSuffix(l, "loop"):
			continue
		case strings.Contains(l, "kubernetes cluster.local"):
			l = strings.Replace(l, "kubernetes cluster.local", "kubernetes cluster.local internal", 1)
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// startDNSOnly starts a container on the cluster's network that is not a
// node: a name only Docker's embedded DNS knows (no node's /etc/hosts
// holds it). It is removed with the cluster's throwaways, and keeps its
// addresses across the nodes' restarts.
func (c *cluster) startDNSOnly(t *testing.T) string {
	t.Helper()
	name := c.name + "-dnsonly"
	if _, err := c.cli(c.slow*time.Minute, nil, "run", "-d", "--name", name,
		"--label", c.prefix+"throwaway="+c.name, "--network", c.net,
		"--entrypoint", "/bin/sleep", c.image, "infinity"); err != nil {
		t.Fatal(err)
	}
	return name
}

// checkDockerNames: a pod on the last node resolves the first control
// plane's container name and dnsOnly's to their addresses now: in IPv6
// (AAAA records only: podprobe resolve6) in ipv6 and dual clusters, in
// IPv4 (podprobe resolve) in ipv4 ones. The path is the pod's
// resolv.conf, CoreDNS, its forward to the node's resolv.conf, and there
// the address that reaches Docker's embedded DNS from the pod's family: in
// an ipv6 cluster the node's own IPv6 address, where our entrypoint's DNS
// forwarder answers; the script's node names only its IPv4 host IP, which
// such a pod cannot reach.
func (c *cluster) checkDockerNames(t *testing.T, stage, dnsOnly string) {
	t.Helper()
	client := c.nodes[len(c.nodes)-1]
	const pod = "names-client"
	if out, err := c.kubectl(fmt.Sprintf(podManifest, pod, client, `["/podprobe"]`), "apply", "-f", "-"); err != nil {
		t.Fatalf("%s: apply %s: %v\n%s", stage, pod, err, out)
	}
	defer func() {
		if out, err := c.kubectl("", "delete", "--grace-period=1", "--wait=true", "pod/"+pod); err != nil {
			t.Errorf("%s: delete %s: %v\n%s", stage, pod, err, out)
		}
	}()
	if out, err := c.waitReady(c.slow*3*time.Minute, "pod/"+pod); err != nil {
		t.Fatalf("%s: %s not Ready: %v\n%s", stage, pod, err, out)
	}
	probe, fam, record := "resolve6", ipv6, "AAAA"
	if c.family == "ipv4" {
		probe, fam, record = "resolve", ipv4, "A"
	}
	recorded := false
	for _, name := range []string{c.cp(), dnsOnly} {
		want := c.nodeAddr(t, name, fam).String()
		var out string
		err := c.eventually(time.Minute, func() error {
			var err error
			out, err = c.kubectl("", "exec", pod, "--", "/podprobe", probe, name)
			if err == nil && !slices.Contains(strings.Fields(out), want) {
				err = fmt.Errorf("got %q, want %s in it", strings.TrimSpace(out), want)
			}
			return err
		})
		if err != nil {
			t.Errorf("%s: %s's %s through CoreDNS and Docker's DNS: %v", stage, name, record, err)
			if !recorded {
				c.recordTraffic(t, stage, "names", client)
				recorded = true
			}
		} else {
			t.Logf("%s: %s's %s through CoreDNS and Docker's DNS: %s", stage, name, record, strings.TrimSpace(out))
		}
	}
}

func median(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	m := bootlog.Median(ds)
	var all []string
	for _, d := range ds {
		all = append(all, fmt.Sprint(d.Round(time.Second)))
	}
	return fmt.Sprintf("%v (n=%d: %s)", m.Round(time.Second), len(ds), strings.Join(all, " "))
}

// writeTable logs the results as the README's table and writes them to
// CLUSTER_LOG_DIR/matrix.md. CLUSTER_MATRIX_ENGINE, when set, names the
// engine in a first column (the Docker 29 tier's backends).
func writeTable(t *testing.T, results []*result) {
	var b strings.Builder
	engine, head, rule := os.Getenv("CLUSTER_MATRIX_ENGINE"), "", ""
	if engine != "" {
		engine, head, rule = "| "+engine+" ", "| engine ", "| --- "
	}
	b.WriteString(head + "| shape | nodes | image | create | checks | names (AAAA; A in ipv4) | restart | checks after restart | names after restart | create time | restart-to-Ready | HA: reverse order, one control plane (passed/run), snapshot |\n")
	b.WriteString(rule + "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "%s| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", engine, r.shape.name, r.shape.nodes(), r.image,
			r.create, r.checks, r.names, r.restart, r.checksAfter, r.namesAfter, median(r.createTimes), median(r.restartTimes), r.more)
	}
	t.Logf("matrix:\n%s", b.String())
	dir := os.Getenv(envLogDir)
	if dir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "matrix.md"), []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
}

func TestIPv6Corefile(t *testing.T) {
	// kubeadm v1.34's Corefile, as kind's cluster holds it
	in := `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
`
	// e2e-k8s.sh's edits but the forward's, and nothing else.
	want := in
	for _, e := range []struct{ line, becomes string }{
		{"    kubernetes cluster.local in-addr.arpa ip6.arpa {\n", "    kubernetes cluster.local internal in-addr.arpa ip6.arpa {\n"},
		{"       fallthrough in-addr.arpa ip6.arpa\n", ""},
		{"    loop\n", ""},
	} {
		if strings.Count(want, e.line) != 1 {
			t.Fatalf("the Corefile holds %q %d times, want once", e.line, strings.Count(want, e.line))
		}
		want = strings.Replace(want, e.line, e.becomes, 1)
	}
	if got := ipv6Corefile(in); got != want {
		t.Errorf("ipv6Corefile:\n%s\nwant:\n%s", got, want)
	}
}
