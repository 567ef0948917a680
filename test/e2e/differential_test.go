//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The differential tier boots kind v0.23.0's script and our binary in the
// same node image, under the same scenario, and diffs what they leave:
// every difference must be a row of the README's "Differences from the
// script", normalised away by an entry of differentialList that names it.
// Anything else fails.
//
// The reference is never copied into the repository: it is read from kind's
// Go module (as bench/run.sh does), or from E2E_DIFF_REFERENCE.

const (
	referenceImage   = "kind-entrypoint-e2e/reference:dev"
	differentialList = "testdata/differential-normalize.txt"
)

// diffScenario is one way of starting a node, for both entrypoints.
type diffScenario struct {
	name    string
	opts    nodeOpts
	restart bool
}

func diffScenarios() []diffScenario {
	return []diffScenario{
		{name: "default"},
		{name: "host-cgroupns", opts: nodeOpts{cgroupns: "host"}},
		{name: "native", opts: nodeOpts{env: []string{"KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=native"}}},
		{name: "fuse-overlayfs", opts: nodeOpts{env: []string{"KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=fuse-overlayfs"}}},
		{name: "proxy", opts: nodeOpts{env: []string{"HTTP_PROXY=http://proxy.example:3128", "HTTPS_PROXY=http://proxy.example:3128", "NO_PROXY=localhost,10.0.0.0/8"}}},
		{name: "dns-search-set", opts: nodeOpts{env: []string{"KIND_DNS_SEARCH=corp.example lab.example"}}},
		{name: "dns-search-empty", opts: nodeOpts{env: []string{"KIND_DNS_SEARCH="}}},
		{name: "restart", restart: true},
	}
}

// TestDifferentialV1 runs every scenario on this (cgroup v1) host.
func TestDifferentialV1(t *testing.T) {
	list, err := readNormalizations(differentialList)
	if err != nil {
		t.Fatal(err)
	}
	ref := buildReferenceImage(t)
	// On this host hugetlb, net_cls,net_prio and perf_event have no v1
	// hierarchy (hierarchy 0 in /proc/cgroups). A node's systemd mounts one
	// for each at boot, but from a private cgroup namespace the kernel only
	// attaches to a hierarchy that exists; only a node in the host's cgroup
	// namespace (the host-cgroupns scenario) creates them, for as long as it
	// runs. So whether a node had them depended on whether another
	// scenario's host-cgroupns node was up when it booted, and the script's
	// node, booted second, had them more often than ours. A host-cgroupns
	// node that runs for the whole test gives every node the same
	// hierarchies. (Seen with 6 of our nodes and 1 of the script's booted
	// with --cgroupns=private: none had them; with such a holder up, each
	// did.)
	holder := startNode(t, newNetwork(t, "diff-holder"), "diff-holder", nodeOpts{noTTY: true, cgroupns: "host"})
	holder.waitRunning()
	used := make([]bool, len(list))
	var mu sync.Mutex
	t.Run("scenarios", func(t *testing.T) {
		for _, sc := range diffScenarios() {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				net := newNetwork(t, "diff-"+sc.name)
				states := map[string]map[string]string{}
				for _, side := range []string{"ours", "script"} {
					o := sc.opts
					// Without a tty no line is lost (README, "The last
					// lines on a tty"): the logs compare line for line.
					o.noTTY = true
					if side == "script" {
						o.image = ref
					}
					n := startNode(t, net, "diff-"+sc.name+"-"+side, o)
					n.waitRunning()
					if sc.restart {
						mustDocker(t, "restart", n.Name)
						n.waitRunning()
					}
					states[side] = collectState(n)
				}
				for _, aspect := range slices.Sorted(maps.Keys(states["ours"])) {
					ours := normalize(list, used, &mu, aspect, "ours", states["ours"][aspect])
					script := normalize(list, used, &mu, aspect, "script", states["script"][aspect])
					if diff := cmp.Diff(script, ours); diff != "" {
						t.Errorf("%s: %s differs from the script's, and no README row covers it (-script +ours):\n%s",
							sc.name, aspect, diff)
					}
				}
			})
		}
	})
	if !t.Failed() {
		// An entry that normalised nothing in any scenario documents a
		// difference this tier no longer sees: the list must say only
		// what is true.
		for i, e := range list {
			if !used[i] && !e.elsewhere {
				t.Errorf("%s:%d (row %s) matched nothing in any scenario: remove it, or mark it \"elsewhere\" if another tier sees it", differentialList, e.line, e.row)
			}
		}
	}
}

// buildReferenceImage builds the node image with the reference script as its
// entrypoint, once per run.
func buildReferenceImage(t *testing.T) string {
	t.Helper()
	script, err := referenceScript()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"entrypoint": string(script),
		// The image's undo-mount-hacks.service runs our binary's companion
		// command; kind's undo-mount-hacks.sh unmounts /proc/cgroups,
		// failure ignored.
		"undo-mount-hacks.conf": "[Service]\nExecStart=\nExecStart=-/bin/umount /proc/cgroups\n",
		"Dockerfile": "FROM " + nodeImage + "\n" +
			"COPY entrypoint /usr/local/bin/entrypoint\n" +
			"COPY undo-mount-hacks.conf /etc/systemd/system/undo-mount-hacks.service.d/reference.conf\n",
	}
	if err := writeBuildContext(dir, files); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("docker", "build", "-q", "-t", referenceImage, dir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build %s: %v\n%s", referenceImage, err, out)
	}
	return referenceImage
}

// referenceScript reads kind v0.23.0's entrypoint from its Go module.
func referenceScript() ([]byte, error) {
	if p := os.Getenv("E2E_DIFF_REFERENCE"); p != "" {
		return os.ReadFile(p)
	}
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/kind@v0.23.0").Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download sigs.k8s.io/kind@v0.23.0 (or set E2E_DIFF_REFERENCE): %w", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("go mod download: no Dir in %q: %v", out, err)
	}
	return os.ReadFile(filepath.Join(mod.Dir, "images/base/files/usr/local/bin/entrypoint"))
}

// diffFiles are the files the steps write, compared with their modes.
var diffFiles = []string{
	"/etc/containerd/config.toml",
	"/etc/systemd/system.conf.d/proxy-default-environment.conf",
	"/etc/resolv.conf",
	"/etc/resolv.conf.original",
	"/etc/machine-id",
	"/var/lib/dbus/machine-id",
	"/kind/product_uuid",
	"/kind/product_name",
	"/kind/fake-cgroups",
	"/kind/old-ipv4",
	"/kind/old-ipv6",
	"/usr/bin/mount",
	"/usr/bin/umount",
}

// collectState reads, from the running node, each aspect the tier compares,
// with the noise that differs between any two containers (addresses, names,
// ids, random ports, counters) replaced by placeholders.
func collectState(n *node) map[string]string {
	n.t.Helper()
	noise := containerNoise(n)
	st := map[string]string{}

	st["log"] = noise.Replace(strings.Join(entrypointLines(n.logs()), "\n"))

	var mounts []string
	for _, m := range n.mounts() {
		super := m.SuperOptions
		if m.FSType == "overlay" || m.FSType == "autofs" {
			super = "" // the container's own layer directories; systemd's pipe
		}
		mounts = append(mounts, fmt.Sprintf("%s %s %s %s %s", m.MountPoint, m.FSType, m.Options, propagation(m.Optional), super))
	}
	slices.Sort(mounts)
	st["mounts of PID 1"] = noise.Replace(strings.Join(mounts, "\n"))

	var files []string
	for _, p := range diffFiles {
		meta, err := n.execErr("stat", "-c", "%A %U:%G %F", p)
		if err != nil {
			files = append(files, p+": missing")
			continue
		}
		line := p + ": " + strings.TrimSpace(meta)
		if link, err := n.execErr("readlink", p); err == nil {
			line += " -> " + strings.TrimSpace(link)
		} else if !strings.HasPrefix(p, "/usr/bin/") {
			content, _ := n.execErr("cat", p)
			line += " " + fmt.Sprintf("%q", noise.Replace(idFormats(content)))
		}
		files = append(files, line)
	}
	st["files"] = strings.Join(files, "\n")

	nat, _ := n.natRules()
	st["iptables nat"] = noise.Replace(natNoise(nat))

	var alts []string
	for _, a := range []string{"iptables", "ip6tables"} {
		q, _ := n.execErr("update-alternatives", "--query", a)
		for _, l := range strings.Split(q, "\n") {
			if strings.HasPrefix(l, "Status:") || strings.HasPrefix(l, "Value:") {
				alts = append(alts, a+" "+l)
			}
		}
	}
	st["alternatives"] = strings.Join(alts, "\n")

	units, _ := n.execErr("systemctl", "list-unit-files", "--state=enabled", "--no-legend", "--no-pager")
	var enabled []string
	for _, l := range strings.Split(units, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			enabled = append(enabled, f[0])
		}
	}
	slices.Sort(enabled)
	st["enabled units"] = strings.Join(enabled, "\n")

	cg, _ := n.execErr("find", "/sys/fs/cgroup", "-maxdepth", "4", "-type", "d", "-name", "kubelet*")
	cgs := strings.Fields(cg)
	var kubelet []string
	for _, d := range cgs {
		line := d
		if cpus, err := n.execErr("cat", d+"/cpuset.cpus"); err == nil {
			mems, _ := n.execErr("cat", d+"/cpuset.mems")
			line += fmt.Sprintf(" cpus=%q mems=%q", strings.TrimSpace(cpus), strings.TrimSpace(mems))
		}
		kubelet = append(kubelet, line)
	}
	var own []string
	for _, l := range strings.Split(noise.Replace(strings.Join(kubelet, "\n")), "\n") {
		// Without a cgroup namespace the host's hierarchy shows every
		// other container's cgroups, the other node's among them.
		if !otherContainer.MatchString(l) {
			own = append(own, l)
		}
	}
	slices.Sort(own)
	st["kubelet cgroups"] = strings.Join(own, "\n")
	return st
}

// containerNoise replaces what differs between any two containers of one
// network: the node's name and address, its container id.
func containerNoise(n *node) *strings.Replacer {
	id := strings.TrimSpace(mustDocker(n.t, "inspect", "-f", "{{.Id}}", n.Name))
	return strings.NewReplacer(n.Name, "NODE", n.ip(), "NODE_IP", id, "CONTAINER_ID", id[:12], "CONTAINER_ID")
}

// propagation is a mount's propagation without peer group numbers.
func propagation(optional []string) string {
	var out []string
	for _, o := range optional {
		kind, _, _ := strings.Cut(o, ":")
		out = append(out, kind)
	}
	if len(out) == 0 {
		return "private"
	}
	return strings.Join(out, ",")
}

var (
	machineIDFormat = regexp.MustCompile(`(?m)^[0-9a-f]{32}$`)
	uuidFormat      = regexp.MustCompile(`(?m)^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	natPort         = regexp.MustCompile(`(127\.0\.0\.11:|--sport |--dport )[0-9]+`)
	natCounters     = regexp.MustCompile(`\[[0-9]+:[0-9]+\]`)
	otherContainer  = regexp.MustCompile(`[0-9a-f]{64}`)
)

// idFormats replaces a machine-id or a UUID, new on every node, with its
// format.
func idFormats(s string) string {
	s = machineIDFormat.ReplaceAllString(s, "MACHINE_ID")
	return uuidFormat.ReplaceAllString(s, "UUID")
}

// natNoise drops iptables-save's comments and counters and Docker's random
// ports (53 stays).
func natNoise(save string) string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		l = natCounters.ReplaceAllString(l, "[0:0]")
		l = natPort.ReplaceAllStringFunc(l, func(m string) string {
			if strings.HasSuffix(m, " 53") || strings.HasSuffix(m, ":53") {
				return m
			}
			return natPort.ReplaceAllString(m, "${1}PORT")
		})
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// normalization is one entry of differentialList: in aspect, on side (ours,
// script or both), each match of re is replaced by repl (with ${1}...);
// a line that becomes empty is dropped. row names the README row that
// documents the difference.
type normalization struct {
	line      int
	row       string
	aspect    string
	side      string
	re        *regexp.Regexp
	repl      string
	elsewhere bool // seen by another tier only: not required to match here
}

// readNormalizations parses the list: one entry per line, fields separated
// by " | ": ROW | ASPECT | SIDE | REGEXP | REPLACEMENT [| elsewhere];
// # starts a comment line.
func readNormalizations(path string) ([]normalization, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		return nil, err
	}
	var out []normalization
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, " | ")
		if len(fields) != 5 && len(fields) != 6 {
			return nil, fmt.Errorf("%s:%d: want ROW | ASPECT | SIDE | REGEXP | REPLACEMENT [| elsewhere], got %q", path, n, line)
		}
		e := normalization{line: n, row: fields[0], aspect: fields[1], side: fields[2], repl: fields[4]}
		if !strings.Contains(string(readme), "| **"+e.row+"** |") {
			return nil, fmt.Errorf("%s:%d: row %q is not in the README's Differences from the script", path, n, e.row)
		}
		if e.side != "ours" && e.side != "script" && e.side != "both" {
			return nil, fmt.Errorf("%s:%d: side %q: want ours, script or both", path, n, e.side)
		}
		if e.re, err = regexp.Compile(fields[3]); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if len(fields) == 6 {
			if fields[5] != "elsewhere" {
				return nil, fmt.Errorf("%s:%d: 6th field %q: want elsewhere", path, n, fields[5])
			}
			e.elsewhere = true
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// normalize applies the entries for aspect and side to text, line by line,
// and marks the entries that matched.
func normalize(list []normalization, used []bool, mu *sync.Mutex, aspect, side, text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for i, e := range list {
			if e.aspect != aspect || (e.side != "both" && e.side != side) || !e.re.MatchString(l) {
				continue
			}
			mu.Lock()
			used[i] = true
			mu.Unlock()
			l = e.re.ReplaceAllString(l, e.repl)
		}
		if l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
