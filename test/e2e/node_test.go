//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// imageContainerdConfig is the config.toml the node image ships.
func imageContainerdConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("node/files/etc/containerd/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestDefaultNode: a node started exactly as kind starts one.
//
// Tests that assert log lines are not parallel (see node.logs).
func TestDefaultNode(t *testing.T) {
	net := newNetwork(t, "default")
	n := startNode(t, net, "default", nodeOpts{})
	n.WaitRunning(bootLimit)
	hostIP := net.Gateway

	t.Run("log", func(t *testing.T) {
		log := n.MustLog()
		tier.RequireLines(t, "docker logs", log, "INFO: detected cgroup v1")
		lines := tier.EntrypointLines(log)
		checkClosingLines(t, lines)
		for _, l := range lines {
			if strings.HasPrefix(l, "ERROR: ") {
				t.Errorf("error logged: %s", l)
			}
		}
	})
	t.Run("systemd", func(t *testing.T) {
		tier.NoFailedUnits(t, n.Node)
		if got, _ := n.ExecErr("systemctl", "is-active", "containerd.service"); strings.TrimSpace(got) != "active" {
			t.Errorf("containerd.service is %q, want active", strings.TrimSpace(got))
		}
		// A oneshot without RemainAfterExit is inactive once done: ask how
		// its run ended.
		got := n.MustExec("systemctl", "show", "--property=Result,ExecMainStatus,ExecMainStartTimestampMonotonic", "undo-mount-hacks.service")
		tier.RequireLines(t, "undo-mount-hacks.service", got, "Result=success", "ExecMainStatus=0")
		if strings.Contains(got, "ExecMainStartTimestampMonotonic=0\n") {
			t.Errorf("undo-mount-hacks.service never ran:\n%s", got)
		}
	})
	t.Run("containerd config untouched", func(t *testing.T) {
		if diff := cmp.Diff(imageContainerdConfig(t), n.readFile("/etc/containerd/config.toml")); diff != "" {
			t.Errorf("config.toml changed with no snapshotter asked for (-image +node):\n%s", diff)
		}
	})
	t.Run("mounts", func(t *testing.T) {
		ms := n.Mounts()
		requireSysReadOnly(t, ms)
		if root := findMount(ms, "/"); root == nil || !hasPrefixed(strings.Fields(root.Optional), "shared:") {
			t.Errorf("/ is not shared: %+v", root)
		}
		tier.CheckKubeletRoots(t, ms)
	})
	t.Run("machine-id", func(t *testing.T) {
		id := n.readFile("/etc/machine-id")
		if !machineIDRe.MatchString(id) {
			t.Errorf("/etc/machine-id = %q, want 32 lowercase hex and a newline", id)
		}
		if strings.TrimSpace(id) == bakedMachineID {
			t.Errorf("/etc/machine-id is the id baked into the image (copied from /var/lib/dbus/machine-id?)")
		}
		if mode := strings.TrimSpace(n.MustExec("stat", "-c", "%a", "/etc/machine-id")); mode != "444" {
			t.Errorf("/etc/machine-id mode %s, want 444", mode)
		}
		if target, err := n.ExecErr("readlink", "/var/lib/dbus/machine-id"); err != nil || strings.TrimSpace(target) != "/etc/machine-id" {
			t.Errorf("/var/lib/dbus/machine-id is not a symlink to /etc/machine-id (readlink: %q, %v)", strings.TrimSpace(target), err)
		}
	})
	t.Run("product_uuid", func(t *testing.T) {
		if u, err := n.ExecErr("cat", "/kind/product_uuid"); err != nil || !uuidRe.MatchString(u) {
			t.Errorf("/kind/product_uuid = %q (%v), want a UUID", u, err)
		}
	})
	t.Run("proxy drop-in", func(t *testing.T) {
		got, err := n.ExecErr("cat", "/etc/systemd/system.conf.d/proxy-default-environment.conf")
		if err != nil {
			t.Fatal(err)
		}
		tier.RequireLines(t, "proxy drop-in", got, "[Manager]")
		requireContains(t, "proxy drop-in", got, "DefaultEnvironment=", `"HTTP_PROXY="`, `"HTTPS_PROXY="`, `"NO_PROXY="`)
	})
	t.Run("iptables", func(t *testing.T) {
		rules, mode := n.natRules()
		m := regexp.MustCompile(`(?m)^INFO: setting iptables to detected mode: (\S+)$`).FindStringSubmatch(n.MustLog())
		if m == nil {
			t.Errorf("no %q line in the log", "INFO: setting iptables to detected mode: MODE")
		} else if m[1] != mode {
			t.Errorf("detected mode %s, but Docker's rules are in %s", m[1], mode)
		}
		// The image points them at legacy (see node/Dockerfile): on a host
		// whose Docker writes nft rules, this shows the entrypoint switched.
		for _, cmd := range []string{"iptables", "ip6tables"} {
			q := n.MustExec("update-alternatives", "--query", cmd)
			tier.RequireLines(t, cmd+" alternative", q, "Value: /usr/sbin/"+cmd+"-"+mode)
		}
		requireDNSRules(t, rules, hostIP)
	})
	t.Run("resolv.conf", func(t *testing.T) {
		got := n.readFile("/etc/resolv.conf")
		tier.RequireLines(t, "resolv.conf", got, "nameserver "+hostIP)
		if strings.Contains(got, "127.0.0.11") {
			t.Errorf("resolv.conf still names Docker's loopback DNS:\n%s", got)
		}
		orig, err := n.ExecErr("cat", "/etc/resolv.conf.original")
		if err != nil {
			t.Errorf("no /etc/resolv.conf.original: %v", err)
		}
		tier.RequireLines(t, "resolv.conf.original", orig, "nameserver 127.0.0.11")
	})
	t.Run("DNS lookup of own name", func(t *testing.T) {
		// -s dns: through the DNS service only, not /etc/hosts, which
		// Docker fills with the node's own name.
		out, err := n.ExecErr("getent", "-s", "dns", "ahostsv4", n.Name)
		if err != nil {
			t.Fatalf("lookup of %s through DNS: %v", n.Name, err)
		}
		if ip := n.ip(); !strings.Contains(out, ip) {
			t.Errorf("lookup of %s gave %q, want %s", n.Name, out, ip)
		}
	})
}

// requireSysReadOnly checks the node's /sys in init's mount table: read-only
// with nosuid, nodev and noexec kept, its superblock still rw.
func requireSysReadOnly(t *testing.T, ms []*mountinfo.Info) {
	t.Helper()
	sys := findMount(ms, "/sys")
	if sys == nil {
		t.Fatal("no /sys mount")
	}
	flags := system.FlagsFromOptions(sys.Options)
	if flags&system.ReadOnly == 0 {
		t.Errorf("/sys is not read-only: %s", sys.Options)
	}
	for _, f := range []system.MountFlags{system.NoSuid, system.NoDev, system.NoExec} {
		if flags&f == 0 {
			t.Errorf("/sys lost %s: %s", f, sys.Options)
		}
	}
	// fix_mount remounts per mount: a per-mount read-only remount leaves the
	// sysfs superblock, shared with every namespace that sees it, rw.
	if system.FlagsFromOptions(sys.VFSOptions)&system.ReadOnly != 0 {
		t.Errorf("/sys superblock made read-only (%s): a plain remount, not a per-mount one", sys.VFSOptions)
	}
}

// requireDNSRules checks the nat table after enable_network_magic: Docker's
// embedded-DNS rules moved from 127.0.0.11 to the host IP, OUTPUT's jump
// twinned in PREROUTING, SNAT to the host IP, and nothing twice.
func requireDNSRules(t *testing.T, save, hostIP string) {
	t.Helper()
	rules := ruleLines(save)
	seen := map[string]int{}
	for _, r := range rules {
		seen[r]++
		if strings.Contains(r, "-d 127.0.0.11") {
			t.Errorf("rule still matches 127.0.0.11: %s", r)
		}
	}
	for r, c := range seen {
		if c > 1 {
			t.Errorf("rule %d times: %s", c, r)
		}
	}
	dst := "-d " + hostIP + "/32"
	tier.RequireLines(t, "nat table", save,
		"-A OUTPUT "+dst+" -j DOCKER_OUTPUT",
		"-A PREROUTING "+dst+" -j DOCKER_OUTPUT",
		"-A POSTROUTING "+dst+" -j DOCKER_POSTROUTING",
	)
	for _, proto := range []string{"tcp", "udp"} {
		dnat := regexp.MustCompile(`^-A DOCKER_OUTPUT ` + regexp.QuoteMeta(dst) + ` -p ` + proto + ` -m ` + proto + ` --dport 53 -j DNAT --to-destination 127\.0\.0\.11:\d+$`)
		snat := regexp.MustCompile(`^-A DOCKER_POSTROUTING -s 127\.0\.0\.11/32 -p ` + proto + ` -m ` + proto + ` --sport \d+ -j SNAT --to-source ` + regexp.QuoteMeta(hostIP) + `:53$`)
		if countMatching(rules, dnat) != 1 {
			t.Errorf("want one %s DNAT rule like %q in:\n%s", proto, dnat, strings.Join(rules, "\n"))
		}
		if countMatching(rules, snat) != 1 {
			t.Errorf("want one %s SNAT rule like %q in:\n%s", proto, snat, strings.Join(rules, "\n"))
		}
	}
}

func countMatching(lines []string, re *regexp.Regexp) int {
	n := 0
	for _, l := range lines {
		if re.MatchString(l) {
			n++
		}
	}
	return n
}

func findMount(ms []*mountinfo.Info, point string) *mountinfo.Info {
	var found *mountinfo.Info
	for _, m := range ms {
		if m.Mountpoint == point {
			found = m // the last one is the visible one
		}
	}
	return found
}

func hasPrefixed(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// checkClosingLines: the entrypoint's lines end with "INFO: pre-init
// finished in N ms" and then "INFO: starting init". With the default
// --tty-settle=0, systemd's console flush may drop the last one or both
// (docs/performance.md, "The last lines on a tty"): only those, and only from the end.
func checkClosingLines(t *testing.T, lines []string) {
	t.Helper()
	preInit := func(l string) bool {
		return strings.HasPrefix(l, "INFO: pre-init finished in ") && strings.HasSuffix(l, " ms")
	}
	n := len(lines)
	switch {
	case n >= 2 && preInit(lines[n-2]) && lines[n-1] == "INFO: starting init":
	case n >= 1 && preInit(lines[n-1]):
		t.Logf("the console flush dropped %q", "INFO: starting init")
	case n >= 1 && !slices.ContainsFunc(lines, preInit) && !slices.Contains(lines, "INFO: starting init"):
		t.Logf("the console flush dropped the last two lines; last line %q", lines[n-1])
	default:
		t.Errorf("the entrypoint's lines do not end with %q, %q (or a loss of those from the end):\n%s",
			"INFO: pre-init finished in N ms", "INFO: starting init", strings.Join(lines, "\n"))
	}
}

// TestNoCgroupns: --cgroupns=host, the cgroup v1 remount path.
func TestNoCgroupns(t *testing.T) {
	// Not parallel: asserts log lines (see node.logs).
	net := newNetwork(t, "hostcgns")
	n := startNode(t, net, "hostcgns", nodeOpts{cgroupns: "host"})
	n.WaitRunning(bootLimit)
	log := n.MustLog()
	if !regexp.MustCompile(`(?m)^WARN: cgroupns not enabled!`).MatchString(log) {
		t.Errorf("no %q line in the log:\n%s", "WARN: cgroupns not enabled! ...", strings.Join(tier.EntrypointLines(log), "\n"))
	}
	tier.RequireLines(t, "docker logs", log, "INFO: detected cgroup v1", "INFO: fixing cgroup mounts for all subsystems")
	checkClosingLines(t, tier.EntrypointLines(log))
	if strings.Contains(log, "INFO: detected cgroupns") {
		t.Error(`"detected cgroupns" logged with --cgroupns=host`)
	}
	tier.CheckKubeletRoots(t, n.Mounts())
	tier.NoFailedUnits(t, n.Node)
}

// TestSnapshotter: KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER rewrites the CRI
// snapshotter in place, every comment kept; fuse-overlayfs also enables its
// unit.
func TestSnapshotter(t *testing.T) {
	// Not parallel, nor its subtests: asserts log lines (see node.logs).
	net := newNetwork(t, "snap")
	orig := imageContainerdConfig(t)
	const defaultLine = `  snapshotter = "overlayfs"`
	if strings.Count(orig, defaultLine) != 1 {
		t.Fatalf("image config.toml should hold %q once", defaultLine)
	}
	for _, snap := range []string{"native", "fuse-overlayfs"} {
		t.Run(snap, func(t *testing.T) {
			n := startNode(t, net, "snap-"+snap, nodeOpts{env: []string{"KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=" + snap}})
			n.WaitRunning(bootLimit)
			want := strings.Replace(orig, defaultLine, `  snapshotter = "`+snap+`"`, 1)
			if diff := cmp.Diff(want, n.readFile("/etc/containerd/config.toml")); diff != "" {
				t.Errorf("config.toml (-want +got):\n%s", diff)
			}
			log := n.MustLog()
			tier.RequireLines(t, "docker logs", log, `INFO: changing snapshotter from "overlayfs" to "`+snap+`"`)
			enabled, _ := n.ExecErr("systemctl", "is-enabled", "containerd-fuse-overlayfs.service")
			link, linkErr := n.ExecErr("readlink", "/etc/systemd/system/multi-user.target.wants/containerd-fuse-overlayfs.service")
			if snap == "fuse-overlayfs" {
				if strings.TrimSpace(enabled) != "enabled" || linkErr != nil {
					t.Errorf("containerd-fuse-overlayfs.service: is-enabled %q, wants link %q (%v); want enabled", strings.TrimSpace(enabled), strings.TrimSpace(link), linkErr)
				}
				if !regexp.MustCompile(`(?m)^INFO: .*containerd-fuse-overlayfs`).MatchString(log) {
					t.Errorf("no INFO line about enabling containerd-fuse-overlayfs.service")
				}
			} else if strings.TrimSpace(enabled) != "disabled" {
				t.Errorf("containerd-fuse-overlayfs.service is %q with snapshotter %s, want disabled", strings.TrimSpace(enabled), snap)
			}
			tier.NoFailedUnits(t, n.Node)
			if got, _ := n.ExecErr("systemctl", "is-active", "containerd.service"); strings.TrimSpace(got) != "active" {
				t.Errorf("containerd.service is %q, want active", strings.TrimSpace(got))
			}
		})
	}
}

// TestProxyEnvironment: proxy values with spaces, quotes, backslashes, % and
// $ reach systemd's manager environment exactly.
func TestProxyEnvironment(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"HTTP_PROXY":  `http://user:p a"ss\word@proxy.example:3128`,
		"HTTPS_PROXY": `https://proxy.example:3129/?q="two words"&x=\\&pct=100%25&%h`,
		"NO_PROXY":    `localhost,127.0.0.1,.svc,$HOME,'single quoted', trailing space `,
		"http_proxy":  `http://lower.example:8080/a\"b`,
	}
	var env []string
	for k, v := range want {
		env = append(env, k+"="+v)
	}
	net := newNetwork(t, "proxy")
	n := startNode(t, net, "proxy", nodeOpts{env: env})
	n.WaitRunning(bootLimit)

	got, err := parseShowEnvironment(n.MustExec("systemctl", "show-environment"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("systemctl show-environment: no %s", k)
		} else if g != v {
			t.Errorf("systemctl show-environment: %s = %q, want %q", k, g, v)
		}
	}
	// What a service really receives: containerd's environment, as the
	// kernel holds it. (Not a transient unit: systemd-run --wait needs
	// D-Bus, which kind's trixie image does not install.)
	pid := strings.TrimSpace(n.MustExec("systemctl", "show", "--property=MainPID", "--value", "containerd.service"))
	environ := n.MustExec("cat", "/proc/"+pid+"/environ")
	seen := map[string]string{}
	for _, kv := range strings.Split(environ, "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			seen[k] = v
		}
	}
	for _, k := range []string{"HTTP_PROXY", "http_proxy"} {
		if g, ok := seen[k]; !ok {
			t.Errorf("containerd.service (pid %s) has no %s", pid, k)
		} else if g != want[k] {
			t.Errorf("a service sees %s = %q, want %q", k, g, want[k])
		}
	}
}

// TestDNSSearch: KIND_DNS_SEARCH unset keeps the search line, empty drops it,
// set replaces it with one line, first.
func TestDNSSearch(t *testing.T) {
	t.Parallel()
	// The host's resolv.conf has no search line here; --dns-search gives
	// Docker's resolv.conf one to keep or drop.
	net := newNetwork(t, "dns")
	for _, tc := range []struct {
		name string
		env  []string
		want func(t *testing.T, resolv string)
	}{
		{"unset", nil, func(t *testing.T, resolv string) {
			if got := searchLines(resolv); !cmp.Equal(got, []string{"search orig.example"}) {
				t.Errorf("search lines %q, want the original one kept:\n%s", got, resolv)
			}
		}},
		{"empty", []string{"KIND_DNS_SEARCH="}, func(t *testing.T, resolv string) {
			if got := searchLines(resolv); len(got) != 0 {
				t.Errorf("search lines %q, want none:\n%s", got, resolv)
			}
		}},
		{"two domains", []string{"KIND_DNS_SEARCH=a.example b.example"}, func(t *testing.T, resolv string) {
			if got := searchLines(resolv); !cmp.Equal(got, []string{"search a.example b.example"}) {
				t.Errorf("search lines %q, want exactly %q:\n%s", got, "search a.example b.example", resolv)
			}
			if first, _, _ := strings.Cut(resolv, "\n"); first != "search a.example b.example" {
				t.Errorf("first line %q, want the search line:\n%s", first, resolv)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := startNode(t, net, "dns-"+strings.ReplaceAll(tc.name, " ", "-"), nodeOpts{env: tc.env, extra: []string{"--dns-search", "orig.example"}})
			n.WaitRunning(bootLimit)
			resolv := n.readFile("/etc/resolv.conf")
			tc.want(t, resolv)
			tier.RequireLines(t, "resolv.conf", resolv, "nameserver "+net.Gateway, "options ndots:0")
		})
	}
}

func searchLines(resolv string) []string {
	var out []string
	for _, l := range strings.Split(resolv, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "search" {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// TestRestart: three `docker restart`s converge: running each time, the
// product uuid kept, no rule or search line added twice.
func TestRestart(t *testing.T) {
	t.Parallel()
	net := newNetwork(t, "restart")
	n := startNode(t, net, "restart", nodeOpts{
		env:   []string{"KIND_DNS_SEARCH=a.example b.example"},
		extra: []string{"--dns-search", "orig.example"},
	})
	n.WaitRunning(bootLimit)
	uuid, uuidErr := n.ExecErr("cat", "/kind/product_uuid")
	if uuidErr != nil {
		t.Errorf("boot 1: no /kind/product_uuid: %v", uuidErr)
	}
	// fix_machine_id makes a new id on every boot: a changed id shows the
	// entrypoint ran again (log lines alone can be lost, see node.logs).
	machineID := n.readFile("/etc/machine-id")
	for boot := 2; boot <= 4; boot++ {
		mustDocker(t, "restart", "--time", "30", n.Name)
		n.WaitRunning(bootLimit)
		if id := n.readFile("/etc/machine-id"); id == machineID {
			t.Errorf("boot %d: /etc/machine-id %q not regenerated", boot, strings.TrimSpace(id))
		} else {
			machineID = id
		}
		if got, err := n.ExecErr("cat", "/kind/product_uuid"); err != nil || uuidErr != nil || got != uuid {
			t.Errorf("boot %d: /kind/product_uuid %q (%v), was %q (%v)", boot, got, err, uuid, uuidErr)
		}
		rules, _ := n.natRules()
		requireDNSRules(t, rules, net.Gateway)
		resolv := n.readFile("/etc/resolv.conf")
		if got := searchLines(resolv); !cmp.Equal(got, []string{"search a.example b.example"}) {
			t.Errorf("boot %d: search lines %q, want exactly one %q:\n%s", boot, got, "search a.example b.example", resolv)
		}
		if c := strings.Count(resolv, "nameserver "); c != 1 {
			t.Errorf("boot %d: %d nameserver lines, want 1:\n%s", boot, c, resolv)
		}
		if failed := n.MustExec("systemctl", "--failed", "--no-legend", "--plain", "--no-pager"); strings.TrimSpace(failed) != "" {
			t.Errorf("boot %d: failed units:\n%s", boot, failed)
		}
	}
}

// TestIPChange: another container takes the node's address while it is
// stopped; on start the old address is rewritten where it stands alone and
// left where it only begins (or ends) a longer address.
func TestIPChange(t *testing.T) {
	// Not parallel: asserts log lines (see node.logs).
	// --ip needs a user-configured subnet; 10.x is outside Docker's default
	// pools, so automatic networks of parallel tests cannot overlap it.
	b := []byte(runID)
	subnet := fmt.Sprintf("10.%d.%d", 100+int(b[0])%100, int(b[1])*7%256)
	net := newNetwork(t, "ipchange", "--subnet", subnet+".0/24", "--gateway", subnet+".1")
	n := startNode(t, net, "ipchange", nodeOpts{})
	n.WaitRunning(bootLimit)
	oldIP := n.ip()
	if got, err := n.ExecErr("cat", "/kind/old-ipv4"); err != nil || got != oldIP {
		t.Errorf("/kind/old-ipv4 = %q (%v), want %q without newline", got, err, oldIP)
	}
	// Addresses that must never be touched: old+"0", old+"54", "1"+old.
	render := func(ip string) string {
		return fmt.Sprintf(`# e2e: only the stand-alone node address may change
apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint: %[1]s:6443
spec:
  containers:
  - command:
    - kube-apiserver
    - --advertise-address=%[1]s
    - --etcd-servers=https://%[1]s:2379
    - --longer=%[2]s0
    - --longer-still=%[2]s54
    - --suffix-of=1%[2]s
`, ip, oldIP)
	}
	files := []string{
		"/etc/kubernetes/manifests/kube-apiserver.yaml",
		"/etc/kubernetes/kubelet.conf",
		"/kind/kubeadm.conf",
	}
	for _, f := range files {
		n.writeFile(f, render(oldIP))
	}
	mustDocker(t, "stop", "--time", "30", n.Name)
	squatter := n.Name + "-squatter"
	t.Cleanup(func() {
		if _, err := dockerCmd(time.Minute, "rm", "--force", squatter); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	mustDocker(t, "run", "--detach", "--name", squatter, "--label", labelKey+"="+runID,
		"--network", net.Name, "--ip", oldIP, "--entrypoint", "/bin/sleep", nodeImage, "infinity")
	mustDocker(t, "start", n.Name)
	n.WaitRunning(bootLimit)
	newIP := n.ip()
	if newIP == oldIP {
		t.Fatalf("node kept %s although %s holds it", oldIP, squatter)
	}
	t.Logf("address changed %s -> %s", oldIP, newIP)
	tier.RequireLines(t, "docker logs", n.MustLog(), "INFO: detected IPv4 address: "+newIP)
	for _, f := range files {
		if diff := cmp.Diff(render(newIP), n.readFile(f)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", f, diff)
		}
	}
	if got, err := n.ExecErr("cat", "/kind/old-ipv4"); err != nil || got != newIP {
		t.Errorf("/kind/old-ipv4 = %q (%v), want %q", got, err, newIP)
	}
}

// TestThreeNodes: nodes of one image on one network get distinct identities
// and find each other through the rewritten DNS.
func TestThreeNodes(t *testing.T) {
	t.Parallel()
	net := newNetwork(t, "three")
	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = startNode(t, net, fmt.Sprintf("three-%d", i), nodeOpts{})
	}
	var wg sync.WaitGroup
	errs := make([]string, len(nodes))
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// waitRunning calls t.Fatal, which must run on the test's
			// goroutine: poll here, judge below.
			_, errs[i] = n.PollRunning(bootLimit)
		}()
	}
	wg.Wait()
	for i, n := range nodes {
		if errs[i] != "" {
			t.Fatalf("%s: %s", n.Name, errs[i])
		}
	}
	ids, uuids := map[string]string{}, map[string]string{}
	for _, n := range nodes {
		id := n.readFile("/etc/machine-id")
		if !machineIDRe.MatchString(id) || strings.TrimSpace(id) == bakedMachineID {
			t.Errorf("%s: machine-id %q: want a fresh 32-hex id", n.Name, id)
		}
		if other, dup := ids[id]; dup {
			t.Errorf("%s and %s share machine-id %q", other, n.Name, strings.TrimSpace(id))
		}
		ids[id] = n.Name
		u, err := n.ExecErr("cat", "/kind/product_uuid")
		if err != nil || !uuidRe.MatchString(u) {
			t.Errorf("%s: /kind/product_uuid %q (%v)", n.Name, u, err)
			continue
		}
		if other, dup := uuids[u]; dup {
			t.Errorf("%s and %s share product_uuid %q", other, n.Name, strings.TrimSpace(u))
		}
		uuids[u] = n.Name
	}
	// Each node resolves the next one's name through DNS.
	for i, n := range nodes {
		peer := nodes[(i+1)%len(nodes)]
		out, err := n.ExecErr("getent", "-s", "dns", "ahostsv4", peer.Name)
		if err != nil || !strings.Contains(out, peer.ip()) {
			t.Errorf("%s: DNS lookup of %s = %q (%v), want %s", n.Name, peer.Name, out, err, peer.ip())
		}
	}
}

// TestDryRun: `entrypoint --dry-run` in a running node exits 0, prints its
// plan and changes nothing.
func TestDryRun(t *testing.T) {
	t.Parallel()
	net := newNetwork(t, "dryrun")
	n := startNode(t, net, "dryrun", nodeOpts{})
	n.WaitRunning(bootLimit)
	const marker = "/tmp/e2e-dry-run-marker"
	before := n.state()
	n.MustExec("touch", marker)
	out, err := n.ExecErr("/usr/local/bin/entrypoint", "--dry-run")
	if err != nil {
		t.Fatalf("entrypoint --dry-run: %v\n%s", err, out)
	}
	if strings.TrimSpace(out) == "" {
		t.Error("entrypoint --dry-run printed nothing (want facts and plan)")
	}
	t.Logf("dry-run output:\n%s", out)
	after := n.state()
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("dry-run changed the node (-before +after):\n%s", diff)
	}
	// Every file of the container's own filesystem (/etc, /kind, /usr...)
	// modified since the marker: /var, /run, /tmp are other mounts.
	if changed := n.MustExec("find", "/", "-xdev", "-newer", marker); strings.TrimSpace(changed) != "" {
		t.Errorf("files changed during the dry run:\n%s", changed)
	}
}

// state captures what the entrypoint may change, for before/after checks.
func (n *node) state() map[string]string {
	n.T.Helper()
	s := map[string]string{}
	for _, f := range []string{
		"/etc/machine-id", "/kind/product_uuid", "/kind/old-ipv4", "/etc/resolv.conf",
		"/etc/resolv.conf.original", "/etc/containerd/config.toml",
		"/etc/systemd/system.conf.d/proxy-default-environment.conf",
	} {
		out, err := n.ExecErr("cat", f)
		s[f] = fmt.Sprintf("%s (err %v)", out, err != nil)
	}
	// /proc/cgroups is left out: its counts move with every cgroup made on
	// the host. So are cgroup superblock options: the hierarchies are
	// shared with the host and the other nodes, whose systemd remounts
	// them (cgroup2 nsdelegate).
	var mounts []string
	for _, m := range n.Mounts() {
		super := m.VFSOptions
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			super = "(shared)"
		}
		mounts = append(mounts, fmt.Sprintf("%s %s %s %s %s", m.Mountpoint, m.Root, m.Options, m.FSType, super))
	}
	s["mounts"] = strings.Join(mounts, "\n")
	for _, argv := range [][]string{
		{"update-alternatives", "--query", "iptables"},
		{"update-alternatives", "--query", "ip6tables"},
		{"stat", "-c", "%n %U:%G %a", "/usr/bin/mount", "/usr/bin/umount"},
		{"ls", "-l", "--time-style=+", "/kind", "/etc/systemd/system/multi-user.target.wants"},
		{"systemctl", "show-environment"},
	} {
		out, err := n.ExecErr(argv...)
		s[strings.Join(argv, " ")] = fmt.Sprintf("%s (err %v)", out, err != nil)
	}
	for _, save := range []string{"iptables-nft-save", "iptables-legacy-save", "ip6tables-nft-save", "ip6tables-legacy-save"} {
		out, _ := n.ExecErr(save)
		s[save] = strings.Join(ruleLines(out), "\n")
	}
	return s
}
