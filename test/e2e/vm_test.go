//go:build e2e && vm

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// The VM tier's node checks (test/vm, make e2e-vm): in a Debian VM with
// cgroup v2, test/vm/guest/nodes.sh sets up the host (root Docker, rootless
// Docker, rootless podman, a user cgroup without memory) and runs one of
// these tests per scenario from this package's test binary (go test -c
// -tags e2e,vm), against the daemon DOCKER_HOST names, or as the rootless
// user for podman. The guest names the node (E2E_VM_NODE), keeps it from
// one scenario to the next (default-node, kubelet-cgroup, restart),
// collects its logs and removes it: these tests leave their nodes.

// vmNetwork is kind's network, which the guest creates in each daemon.
const vmNetwork = "kind"

const (
	userNSLine    = "INFO: running in a user namespace (experimental)"
	noMemoryError = "ERROR: validate_userns: UserNS: memory controller needs to be delegated"
	// vmDNSSearch is the search domain the podman cluster's kind config
	// asks for (networking.dnsSearch, KIND_DNS_SEARCH in the node).
	vmDNSSearch = "podman.example"
)

var reachedMultiUserRe = regexp.MustCompile(tier.ReachedMultiUser)

// vmNode is the node E2E_VM_NODE of the daemon DOCKER_HOST names.
func vmNode(t *testing.T) *node {
	t.Helper()
	name := tier.MustEnv(t, "E2E_VM_NODE", "test/vm/guest/nodes.sh sets it")
	return &node{TestNode: tier.NewTestNode(t, "docker", name), Network: &network{Name: vmNetwork}}
}

// startVMNode runs the node E2E_VM_NODE as kind runs one, --tty included.
func startVMNode(t *testing.T) *node {
	t.Helper()
	n := vmNode(t)
	args := append([]string{"run", "--name", n.Name}, tier.KindRunArgs("docker", tier.KindNode{Name: n.Name, Network: vmNetwork, Cgroupns: "private"})...)
	start := time.Now()
	tier.MustRun(t, 5*time.Minute, "docker", append(args, nodeImage)...)
	t.Logf("%s: docker run took %v", n.Name, time.Since(start).Round(time.Millisecond))
	return n
}

// checkVMNode asserts what every node of the VM that boots must show:
// tier.CheckNode (systemd running within limit, no failed unit, `detected
// cgroup v2`, no ERROR: line, no fail row of `entrypoint check`), the line
// kind waits for on cgroup v2 (Multi-User System reached), and
// `running in a user namespace` exactly when userns. It returns the log
// and its INFO:/WARN:/ERROR: lines.
func checkVMNode(t *testing.T, n tier.Node, limit time.Duration, userns bool) (string, []string) {
	t.Helper()
	lines := tier.CheckNode(t, n, limit)
	log, err := n.Log()
	if err != nil {
		t.Fatal(err)
	}
	if !reachedMultiUserRe.MatchString(log) {
		t.Errorf("%s: no line matching kind's wait regexp %q in the log", n.Name, tier.ReachedMultiUser)
	}
	if got := slices.Contains(lines, userNSLine); got != userns {
		t.Errorf("%s: line %q logged: %v, want %v (a user namespace)", n.Name, userNSLine, got, userns)
	}
	return log, lines
}

// checkDMI: the node's DMI product files are its own (the VM has real
// ones): product_name is kind, both product_uuid paths show
// /kind/product_uuid.
func checkDMI(n *node) {
	n.T.Helper()
	if got := strings.TrimSpace(n.readFile("/sys/class/dmi/id/product_name")); got != "kind" {
		n.T.Errorf("%s: /sys/class/dmi/id/product_name is %q, want kind", n.Name, got)
	}
	uuid := n.readFile("/kind/product_uuid")
	if !uuidRe.MatchString(uuid) {
		n.T.Errorf("%s: /kind/product_uuid is %q, want a UUID", n.Name, uuid)
	}
	for _, f := range []string{"/sys/class/dmi/id/product_uuid", "/sys/devices/virtual/dmi/id/product_uuid"} {
		if got, err := n.ExecErr("cat", f); err != nil || strings.TrimSpace(got) != strings.TrimSpace(uuid) {
			n.T.Errorf("%s: %s is %q (%v), want /kind/product_uuid %q", n.Name, f, got, err, uuid)
		}
	}
}

// TestVMDefaultNode (scenario default-node): a node of root Docker boots;
// its DMI files are its own and its /sys is read-only.
func TestVMDefaultNode(t *testing.T) {
	n := startVMNode(t)
	checkVMNode(t, n.Node, bootLimit, false)
	checkDMI(n)
	requireSysReadOnly(t, n.Mounts())
}

// TestVMKubeletCgroup (scenario kubelet-cgroup): in default-node's node,
// `entrypoint create-kubelet-cgroup-v2` makes /kubelet and /kubelet.slice
// with cpu, memory and pids, every controller enabled for their children.
func TestVMKubeletCgroup(t *testing.T) {
	n := vmNode(t)
	if out, err := n.ExecErr("entrypoint", "create-kubelet-cgroup-v2"); err != nil {
		t.Fatalf("create-kubelet-cgroup-v2: %v\n%s", err, out)
	}
	for _, d := range []string{"/kubelet", "/kubelet.slice"} {
		controllers, err := n.ExecErr("cat", "/sys/fs/cgroup"+d+"/cgroup.controllers")
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		subtree, err := n.ExecErr("cat", "/sys/fs/cgroup"+d+"/cgroup.subtree_control")
		if err != nil {
			t.Errorf("%s: %v", d, err)
		}
		have, enabled := strings.Fields(controllers), strings.Fields(subtree)
		t.Logf("%s: controllers %q, subtree_control %q", d, have, enabled)
		for _, c := range []string{"cpu", "memory", "pids"} {
			if !slices.Contains(have, c) {
				t.Errorf("%s: no %s in cgroup.controllers %q", d, c, have)
			}
		}
		for _, c := range have {
			if !slices.Contains(enabled, c) {
				t.Errorf("%s: %s not in cgroup.subtree_control %q", d, c, enabled)
			}
		}
	}
}

// TestVMRestart (scenario restart): `docker restart` of default-node's
// node: running again, the entrypoint ran again (a new machine-id) and kept
// /kind/product_uuid, resolv.conf has the host's one search line once and
// one nameserver, the DMI files are still the node's. TestMain checks that
// the VM's own /sys did not change.
func TestVMRestart(t *testing.T) {
	n := vmNode(t)
	hostResolv, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	// Docker gives a node on a user-defined network the host's search
	// domains; the guest writes one.
	hostSearch := tier.ResolvLines(string(hostResolv), "search")
	if len(hostSearch) != 1 {
		t.Fatalf("the VM's resolv.conf has search lines %q, want one (nodes.sh writes it)", hostSearch)
	}
	uuid := n.readFile("/kind/product_uuid")
	machineID := n.readFile("/etc/machine-id")
	start := time.Now()
	tier.MustRun(t, 5*time.Minute, "docker", "restart", "--time", "60", n.Name)
	t.Logf("%s: docker restart took %v", n.Name, time.Since(start).Round(time.Millisecond))
	checkVMNode(t, n.Node, bootLimit, false)
	if got := n.readFile("/kind/product_uuid"); got != uuid {
		t.Errorf("/kind/product_uuid changed: %q -> %q", uuid, got)
	}
	// fix_machine_id writes a new id on every boot: a new one shows the
	// entrypoint ran again.
	if got := n.readFile("/etc/machine-id"); got == machineID {
		t.Errorf("/etc/machine-id %q not regenerated on restart", strings.TrimSpace(got))
	}
	resolv := n.readFile("/etc/resolv.conf")
	if got := tier.ResolvLines(resolv, "search"); !slices.Equal(got, hostSearch) {
		t.Errorf("search lines %q in /etc/resolv.conf, want exactly %q:\n%s", got, hostSearch, resolv)
	}
	if got := tier.ResolvLines(resolv, "nameserver"); len(got) != 1 {
		t.Errorf("%d nameserver lines in /etc/resolv.conf, want 1:\n%s", len(got), resolv)
	}
	checkDMI(n)
}

// TestVMRootlessNode (scenario rootless-node): a node of rootless Docker
// boots in its user namespace and has what validate_userns requires; its
// containerd config restricts oom_score_adj and names the snapshotter the
// log announced; its /sys is read-only unless the log says the remount's
// failure was tolerated.
func TestVMRootlessNode(t *testing.T) {
	n := startVMNode(t)
	log, lines := checkVMNode(t, n.Node, bootLimit, true)
	controllers := strings.Fields(n.readFile("/sys/fs/cgroup/cgroup.controllers"))
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !slices.Contains(controllers, c) {
			t.Errorf("no %s in the node's cgroup.controllers %q", c, controllers)
		}
	}
	config := n.readFile("/etc/containerd/config.toml")
	if !regexp.MustCompile(`(?m)^[[:space:]]*restrict_oom_score_adj = true$`).MatchString(config) {
		t.Errorf("no 'restrict_oom_score_adj = true' in /etc/containerd/config.toml:\n%s", config)
	}
	// The default stays only when overlayfs works in the user namespace.
	want := "overlayfs"
	if m := regexp.MustCompile(`(?m)^INFO: changing snapshotter from "[^"]*" to "([^"]*)"`).FindStringSubmatch(log); m != nil {
		want = m[1]
	} else if slices.Contains(lines, "INFO: UserNS: kernel does not seem to support overlayfs.") {
		t.Errorf("overlayfs judged unusable, but no 'changing snapshotter' line")
	}
	t.Logf("%s: snapshotter %s", n.Name, want)
	if !regexp.MustCompile(`(?m)^[[:space:]]*snapshotter = "` + regexp.QuoteMeta(want) + `"$`).MatchString(config) {
		t.Errorf("no 'snapshotter = %q' in /etc/containerd/config.toml:\n%s", want, config)
	}
	// In a user namespace the read-only remount may be refused.
	if slices.Contains(lines, "INFO: UserNS: ignoring mount fail") {
		t.Logf("%s: the /sys remount failed, tolerated", n.Name)
	} else {
		requireSysReadOnly(t, n.Mounts())
	}
}

// TestVMRootlessPodman (scenario rootless-podman), run by the guest as the
// rootless user with E2E_ENGINE=podman: the kind CLI (E2E_VM_KIND) with
// its podman provider creates the cluster E2E_VM_CLUSTER, 1 control plane
// and 1 worker, from E2E_NODE_IMAGE, and stops exactly at kubeadm (the
// image has none). Each node shows what every node must, and the DNS of a
// node without Docker's: podman's nameservers kept, only the search domain
// of kind's config, the other node's name answered by podman's DNS. The
// guest deletes the cluster.
func TestVMRootlessPodman(t *testing.T) {
	if engine != "podman" {
		t.Fatalf("E2E_ENGINE=%s, want podman", engine)
	}
	cluster := tier.MustEnv(t, "E2E_VM_CLUSTER", "test/vm/guest/nodes.sh sets it")
	kind := tier.MustEnv(t, "E2E_VM_KIND", "test/vm/guest/nodes.sh sets it")
	config := filepath.Join(t.TempDir(), "kind-podman.yaml")
	if err := os.WriteFile(config, []byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  dnsSearch: ["+
		vmDNSSearch+"]\nnodes:\n- role: control-plane\n- role: worker\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// runc and crun word the missing kubeadm differently (Debian's podman
	// picks crun): exit 127 and podman's own words. kind v0.23.0 runs
	// `kubeadm init --skip-phases=preflight --config=...`, v0.33.0
	// `kubeadm init --config=...` (VM_STACK).
	tier.KindCreateWithoutKubeadm(t, kind, append(os.Environ(), "KIND_EXPERIMENTAL_PROVIDER=podman"),
		[]string{"--name", cluster, "--image", nodeImage, "--config", config, "--retain", "--wait", "0s"},
		"kubeadm init --", "failed with error: exit status 127",
		"OCI runtime attempted to invoke a command that was not found")
	cp, worker := cluster+"-control-plane", cluster+"-worker"
	for _, pair := range [][2]string{{cp, worker}, {worker, cp}} {
		name, other := pair[0], pair[1]
		t.Run(name, func(t *testing.T) {
			if _, err := tier.Run(time.Minute, nil, "podman", "container", "exists", name); err != nil {
				t.Fatalf("kind left no node %s: %v", name, err)
			}
			n := tier.Node{Engine: "podman", Name: name}
			// kind has returned: systemd must be running already (one look).
			_, lines := checkVMNode(t, n, time.Second, true)
			resolv := tier.LeavesDNSAlone(t, n, lines)
			if got := tier.ResolvLines(resolv, "search"); !slices.Equal(got, []string{"search " + vmDNSSearch}) {
				t.Errorf("%s: search lines %q, want only %q (KIND_DNS_SEARCH)", name, got, "search "+vmDNSSearch)
			}
			ip, err := tier.Run(time.Minute, nil, "podman", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", other)
			ip = strings.TrimSpace(ip)
			if err != nil || ip == "" {
				t.Fatalf("%s: no address (%v)", other, err)
			}
			out, err := n.ExecErr("getent", "ahostsv4", other)
			if f := strings.Fields(out); err != nil || len(f) == 0 || f[0] != ip {
				t.Errorf("%s: podman's DNS gives %s as %q (%v), want %s", name, other, out, err, ip)
			}
		})
	}
}

// TestVMRootlessNoMemory (scenario rootless-no-memory): under a rootless
// Docker whose cgroup has no memory controller (the guest takes it away),
// the node exits non-zero within E2E_EXIT_LIMIT, each run (1 + restarts,
// --restart=on-failure:1) printing exactly one validate_userns error, and
// init never starts.
func TestVMRootlessNoMemory(t *testing.T) {
	limit := mustDuration(tier.MustEnv(t, "E2E_EXIT_LIMIT", "test/vm/guest/nodes.sh sets it"))
	n := startVMNode(t)
	start := time.Now()
	var status string
	for time.Since(start) < limit {
		out, err := tier.Run(time.Minute, nil, "docker", "inspect", "-f", "{{.State.Status}}", n.Name)
		if status = strings.TrimSpace(out); err == nil && status == "exited" {
			break
		}
		time.Sleep(time.Second)
	}
	if status != "exited" {
		t.Fatalf("the node is still %q after %v, want exited", status, limit)
	}
	f := strings.Fields(tier.MustRun(t, time.Minute, "docker", "inspect", "-f", "{{.State.ExitCode}} {{.RestartCount}}", n.Name))
	if len(f) != 2 {
		t.Fatalf("docker inspect: exit code and restart count: %q", f)
	}
	restarts, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: exited with %s after %v, %d restarts", n.Name, f[0], time.Since(start).Round(time.Second), restarts)
	if f[0] == "0" {
		t.Errorf("the node exited 0, want non-zero")
	}
	log := n.MustLog()
	var errs []string
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "ERROR:") {
			errs = append(errs, l)
		}
	}
	runs := restarts + 1
	if len(errs) != runs || slices.ContainsFunc(errs, func(l string) bool { return l != noMemoryError }) {
		t.Errorf("want %d x %q (one per run), got %d ERROR lines:\n%s", runs, noMemoryError, len(errs), strings.Join(errs, "\n"))
	}
	if strings.Contains(log, "Reached target") {
		t.Errorf("init started although the controller check failed:\n%s", log)
	}
}
