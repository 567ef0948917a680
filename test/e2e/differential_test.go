//go:build e2e

package e2e

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// The differential tier boots kind's script (v0.23.0's, SPEC.md's
// reference; on the kind v0.33 stack, test/stack, that release's: the
// E2E_DIFF_KIND_VERSION it sets) and our binary in the same node image, under the same scenario, and diffs what they leave:
// every difference must be a row of docs/differences.md ("Differences from
// the script"), normalised away by an entry of differentialList that names it.
// Anything else fails.
//
// The reference is never copied into the repository: it is read from kind's
// Go module (as bench/run.sh does), or from E2E_DIFF_KIND.

const (
	referenceImage   = "kind-entrypoint-e2e/reference:dev"
	differentialList = "testdata/differential-normalize.txt"
)

// diffKindVersion is the kind release whose script is the control.
var diffKindVersion = envOr("E2E_DIFF_KIND_VERSION", "v0.23.0")

// diffScenario is one way of starting a node, for both entrypoints.
type diffScenario struct {
	name    string
	opts    nodeOpts
	restart bool
	// then is a further scenario on the same nodes, diffed once this one
	// is collected: under emulation (the VM) a node boot is the dearest
	// part of a scenario.
	then *diffThen
}

// diffThen is a scenario that goes on from another's nodes: a command run
// in each node (by side: the same companion command, as each image has
// it), then the state diffed again.
type diffThen struct {
	name string
	argv map[string][]string
}

// Where the tier runs (diffHost): this cgroup v1 host, and in the VM tier
// (test/vm) a cgroup v2 host under root Docker and under rootless Docker.
const (
	hostV1       = "v1"
	hostV2       = "v2"
	hostRootless = "rootless"
)

// diffScenarios are the scenarios of a host kind (see diffHost).
func diffScenarios(host string) []diffScenario {
	switch host {
	case hostV1:
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
	case hostV2:
		return []diffScenario{
			// create-kubelet-cgroup-v2 is what kubelet.service's
			// ExecStartPre runs on cgroup v2, once systemd is up.
			{name: "default", then: &diffThen{name: "create-kubelet-cgroup-v2", argv: map[string][]string{
				"ours":   {"entrypoint", "create-kubelet-cgroup-v2"},
				"script": {"/kind/bin/create-kubelet-cgroup-v2.sh"},
			}}},
			{name: "restart", restart: true},
		}
	case hostRootless:
		return []diffScenario{{name: "rootless"}}
	}
	return nil
}

// diffHost says where the tier runs: rootless when the Docker daemon is
// rootless, else v2 or v1 by the host's cgroup hierarchy.
func diffHost(t *testing.T) string {
	t.Helper()
	sec := mustDocker(t, "info", "--format", "{{.SecurityOptions}}")
	switch {
	case strings.Contains(sec, "name=rootless"):
		return hostRootless
	case tier.CgroupV2():
		return hostV2
	}
	return hostV1
}

// TestDifferential runs the scenarios of this host: on the e2e host (cgroup
// v1) from test/e2e/run.sh, and in the VM tier (cgroup v2, root and
// rootless Docker) from the compiled test binary.
func TestDifferential(t *testing.T) {
	list, err := readNormalizations(differentialList)
	if err != nil {
		t.Fatal(err)
	}
	host := diffHost(t)
	t.Logf("differential scenarios of a %s host", host)
	ref := buildReferenceImage(t)
	if host == hostV1 {
		// On this host hugetlb, net_cls,net_prio and perf_event have no
		// v1 hierarchy (hierarchy 0 in /proc/cgroups). A node's systemd
		// mounts one for each at boot, but from a private cgroup namespace
		// the kernel only attaches to a hierarchy that exists; only a node
		// in the host's cgroup namespace (the host-cgroupns scenario)
		// creates them, for as long as it runs. So whether a node had them
		// depended on whether another scenario's host-cgroupns node was up
		// when it booted, and the script's node, booted second, had them
		// more often than ours. A host-cgroupns node that runs for the
		// whole test gives every node the same hierarchies. (Seen with 6
		// of our nodes and 1 of the script's booted with
		// --cgroupns=private: none had them; with such a holder up, each
		// did.) cgroup v2 has one hierarchy: nothing to hold. The holder
		// boots the script: ours hides those controllers from systemd
		// (unmounted-controllers-hidden), and would hold nothing.
		holder := startNode(t, newNetwork(t, "diff-holder"), "diff-holder", nodeOpts{noTTY: true, cgroupns: "host", image: ref})
		holder.WaitRunning(bootLimit)
	}
	used := make([]bool, len(list))
	var mu sync.Mutex
	t.Run("scenarios", func(t *testing.T) {
		for _, sc := range diffScenarios(host) {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				net := newNetwork(t, "diff-"+sc.name)
				states := map[string]map[string]string{}
				var thenStates map[string]map[string]string
				if sc.then != nil {
					thenStates = map[string]map[string]string{}
				}
				for _, side := range []string{"ours", "script"} {
					o := sc.opts
					// Without a tty no line is lost (docs/performance.md, "The last
					// lines on a tty"): the logs compare line for line.
					o.noTTY = true
					if side == "script" {
						o.image = ref
					}
					n := startNode(t, net, "diff-"+sc.name+"-"+side, o)
					n.WaitRunning(bootLimit)
					if sc.restart {
						mustDocker(t, "restart", n.Name)
						n.WaitRunning(bootLimit)
					}
					states[side] = collectState(n)
					if sc.then != nil {
						n.MustExec(sc.then.argv[side]...)
						thenStates[side] = collectState(n)
					}
				}
				compare := func(name string, states map[string]map[string]string) {
					for _, aspect := range slices.Sorted(maps.Keys(states["ours"])) {
						ours := normalize(list, used, &mu, aspect, "ours", states["ours"][aspect])
						script := normalize(list, used, &mu, aspect, "script", states["script"][aspect])
						if diff := cmp.Diff(script, ours); diff != "" {
							t.Errorf("%s: %s differs from the script's, and no row of docs/differences.md covers it (-script +ours):\n%s",
								name, aspect, diff)
						}
					}
				}
				compare(sc.name, states)
				if sc.then != nil {
					compare(sc.then.name, thenStates)
				}
			})
		}
	})
	if !t.Failed() {
		// An entry that normalised nothing in any scenario of a host it
		// is for documents a difference this tier no longer sees: the
		// list must say only what is true.
		for i, e := range list {
			if !used[i] && e.requiredOn(host) {
				t.Errorf("%s:%d (row %s) matched nothing in any scenario of a %s host: remove it, or limit it with \"only\" to the hosts that see it",
					differentialList, e.line, e.row, host)
			}
		}
	}
}

// buildReferenceImage builds the node image with the reference script as its
// entrypoint, and kind's create-kubelet-cgroup-v2.sh, once per run.
func buildReferenceImage(t *testing.T) string {
	t.Helper()
	files := map[string]string{
		// The image's undo-mount-hacks.service runs our binary's companion
		// command; kind's undo-mount-hacks.sh unmounts /proc/cgroups,
		// failure ignored.
		"undo-mount-hacks.conf": "[Service]\nExecStart=\nExecStart=-/bin/umount /proc/cgroups\n",
		"Dockerfile": "FROM " + nodeImage + "\n" +
			"COPY entrypoint /usr/local/bin/entrypoint\n" +
			"COPY create-kubelet-cgroup-v2.sh /kind/bin/create-kubelet-cgroup-v2.sh\n" +
			"COPY undo-mount-hacks.conf /etc/systemd/system/undo-mount-hacks.service.d/reference.conf\n",
	}
	for name, path := range map[string]string{
		"entrypoint":                  "usr/local/bin/entrypoint",
		"create-kubelet-cgroup-v2.sh": "kind/bin/create-kubelet-cgroup-v2.sh",
	} {
		b, err := referenceFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	return buildImage(t, referenceImage, files)
}

// referenceFile reads a file of diffKindVersion's base image (path under
// images/base/files) from its Go module, or from the copy of the module's
// tree that E2E_DIFF_KIND names (the VM, which has no Go).
func referenceFile(path string) ([]byte, error) {
	dir := os.Getenv("E2E_DIFF_KIND")
	if dir == "" {
		module := "sigs.k8s.io/kind@" + diffKindVersion
		out, err := exec.Command("go", "mod", "download", "-json", module).Output()
		if err != nil {
			return nil, fmt.Errorf("go mod download %s (or set E2E_DIFF_KIND): %w", module, err)
		}
		var mod struct{ Dir string }
		if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
			return nil, fmt.Errorf("go mod download: no Dir in %q: %v", out, err)
		}
		dir = mod.Dir
	}
	return os.ReadFile(filepath.Join(dir, "images/base/files", path))
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
	n.T.Helper()
	noise := containerNoise(n)
	st := map[string]string{}

	st["log"] = noise.Replace(strings.Join(tier.EntrypointLines(n.MustLog()), "\n"))

	var mounts []string
	for _, m := range n.Mounts() {
		super := m.VFSOptions
		if m.FSType == "overlay" || m.FSType == "autofs" {
			super = "" // the container's own layer directories; systemd's pipe
		}
		mounts = append(mounts, fmt.Sprintf("%s %s %s %s %s", m.Mountpoint, m.FSType, m.Options, propagation(strings.Fields(m.Optional)), super))
	}
	slices.Sort(mounts)
	st["mounts of PID 1"] = noise.Replace(strings.Join(mounts, "\n"))

	files, err := nodeFiles(n, noise)
	if err != nil {
		n.T.Fatal(err)
	}
	st["files"] = files

	nat, _ := n.natRules()
	st["iptables nat"] = noise.Replace(natNoise(nat))

	var alts []string
	for _, a := range []string{"iptables", "ip6tables"} {
		q := mustCollect(n, time.Minute, "update-alternatives", "--query", a)
		for _, l := range strings.Split(q, "\n") {
			if strings.HasPrefix(l, "Status:") || strings.HasPrefix(l, "Value:") {
				alts = append(alts, a+" "+l)
			}
		}
	}
	st["alternatives"] = strings.Join(alts, "\n")

	// Which units are enabled is a fact of the unit files: --root=/ has
	// systemctl work it out itself, as PID 1 would, with the same result.
	// It is dear: 320,000 system calls, 0.7 s of CPU here, and 10 to 34 s
	// in the VM under emulation, which slows system calls most. Asked over
	// D-Bus, PID 1 did that work within D-Bus's 25 s limit, or did not,
	// and then no retry did either: a node's systemd left six tries over
	// 3.5 minutes unanswered ("Connection timed out"). Done by systemctl,
	// PID 1 is spared, and the read has five minutes.
	start := time.Now()
	units := mustCollect(n, 5*time.Minute, "systemctl", "--root=/", "list-unit-files", "--state=enabled", "--no-legend", "--no-pager")
	n.T.Logf("%s: enabled units read in %v", n.Name, time.Since(start).Round(time.Millisecond))
	var enabled []string
	for _, l := range strings.Split(units, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			enabled = append(enabled, f[0])
		}
	}
	slices.Sort(enabled)
	st["enabled units"] = strings.Join(enabled, "\n")

	// One exec for the directories, one for their cpusets (grep prints
	// FILE:LINE; a v2 cgroup without the cpuset controller has none).
	cg, _ := n.ExecErr("find", "/sys/fs/cgroup", "-maxdepth", "4", "-type", "d", "-name", "kubelet*")
	cgs := strings.Fields(cg)
	cpusets := map[string]string{}
	if len(cgs) > 0 {
		args := []string{"grep", "-s", "-H", "^"}
		for _, d := range cgs {
			args = append(args, d+"/cpuset.cpus", d+"/cpuset.mems")
		}
		out, _ := n.ExecErr(args...)
		for _, l := range strings.Split(out, "\n") {
			if f, v, ok := strings.Cut(l, ":"); ok {
				cpusets[f] = v
			}
		}
	}
	var kubelet []string
	for _, d := range cgs {
		line := d
		if cpus, ok := cpusets[d+"/cpuset.cpus"]; ok {
			line += fmt.Sprintf(" cpus=%q mems=%q", cpus, cpusets[d+"/cpuset.mems"])
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

// nodeFiles describes each of diffFiles in the node, one line each: mode,
// owner, type, and the link's target or the content (not of the binaries
// under /usr/bin), ids replaced by their formats; "missing" when it is not
// there. One `tar` exec reads them all: under emulation (the VM tier) every
// exec costs seconds.
func nodeFiles(n *node, noise *strings.Replacer) (string, error) {
	// tar exits 2 for the missing ones and archives the rest.
	out, err := n.ExecErr(append([]string{"tar", "-c", "-f", "-", "--absolute-names"}, diffFiles...)...)
	if out == "" && err != nil {
		return "", err
	}
	found := map[string]string{}
	tr := tar.NewReader(strings.NewReader(out))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("tar of %s's files: %w", n.Name, err)
		}
		line := fmt.Sprintf("%s %s:%s", modeString(h), h.Uname, h.Gname)
		switch h.Typeflag {
		case tar.TypeSymlink:
			line += " symbolic link -> " + h.Linkname
		case tar.TypeReg:
			line += " regular file"
			if !strings.HasPrefix(h.Name, "/usr/bin/") {
				b, err := io.ReadAll(tr)
				if err != nil {
					return "", err
				}
				line += fmt.Sprintf(" %q", noise.Replace(idFormats(string(b))))
			}
		default:
			line += fmt.Sprintf(" type %q", h.Typeflag)
		}
		found[h.Name] = line
	}
	var lines []string
	for _, p := range diffFiles {
		line, ok := found[p]
		if !ok {
			line = "missing"
		}
		lines = append(lines, p+": "+line)
	}
	return strings.Join(lines, "\n"), nil
}

// modeString is ls's mode column of a tar entry (l for a symbolic link;
// s, S, t, T for the set-id and sticky bits).
func modeString(h *tar.Header) string {
	b := []byte("----------")
	if h.Typeflag == tar.TypeSymlink {
		b[0] = 'l'
	}
	for i, c := range "rwxrwxrwx" {
		if h.Mode&(1<<(8-i)) != 0 {
			b[i+1] = byte(c)
		}
	}
	for _, sp := range []struct {
		bit      int64
		at       int
		set, off byte
	}{{04000, 3, 's', 'S'}, {02000, 6, 's', 'S'}, {01000, 9, 't', 'T'}} {
		if h.Mode&sp.bit != 0 {
			if b[sp.at] == 'x' {
				b[sp.at] = sp.set
			} else {
				b[sp.at] = sp.off
			}
		}
	}
	return string(b)
}

// mustCollect runs a read in the node, limit at most, that must succeed,
// and fails the test when it does not after six tries, the waits doubling
// from 2 s. A failed read taken as empty output made a difference that was
// not there. A read that is slow by its nature gets a limit to match, and
// one that runs out of it is not tried again: the same work would only
// pile onto a busy node (see the enabled units in collectState).
func mustCollect(n *node, limit time.Duration, argv ...string) string {
	n.T.Helper()
	var err error
	wait := 2 * time.Second
	for try := 0; try < 6; try++ {
		if try > 0 {
			time.Sleep(wait)
			wait *= 2
		}
		var out string
		if out, err = n.ExecWithin(limit, argv...); err == nil {
			return out
		}
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		n.T.Logf("%s: try %d: %v", n.Name, try+1, err)
	}
	n.T.Fatalf("%s: %v", n.Name, err)
	return ""
}

// containerNoise replaces what differs between any two containers of one
// network: the node's name and address, its container id.
func containerNoise(n *node) *strings.Replacer {
	id := strings.TrimSpace(mustDocker(n.T, "inspect", "-f", "{{.Id}}", n.Name))
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
// a line that becomes empty is dropped. row names the docs/differences.md row that
// documents the difference.
type normalization struct {
	line   int
	row    string
	aspect string
	side   string
	re     *regexp.Regexp
	repl   string
	only   []string // the hosts (diffHost) it must match on; nil: every host
}

// requiredOn reports whether the entry must match something on a host.
func (e normalization) requiredOn(host string) bool {
	return e.only == nil || slices.Contains(e.only, host)
}

// readNormalizations parses the list: one entry per line, fields separated
// by " | ": ROW | ASPECT | SIDE | REGEXP | REPLACEMENT [| only HOST,...];
// # starts a comment line.
func readNormalizations(path string) ([]normalization, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	differences, err := os.ReadFile("../../docs/differences.md")
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
			return nil, fmt.Errorf("%s:%d: want ROW | ASPECT | SIDE | REGEXP | REPLACEMENT [| only HOST,...], got %q", path, n, line)
		}
		e := normalization{line: n, row: fields[0], aspect: fields[1], side: fields[2], repl: fields[4]}
		if !strings.Contains(string(differences), "| **"+e.row+"** |") {
			return nil, fmt.Errorf("%s:%d: row %q is not in docs/differences.md", path, n, e.row)
		}
		if e.side != "ours" && e.side != "script" && e.side != "both" {
			return nil, fmt.Errorf("%s:%d: side %q: want ours, script or both", path, n, e.side)
		}
		if e.re, err = regexp.Compile(fields[3]); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if len(fields) == 6 {
			hosts, ok := strings.CutPrefix(fields[5], "only ")
			if ok {
				e.only = strings.Split(hosts, ",")
			}
			for _, h := range e.only {
				ok = ok && (h == hostV1 || h == hostV2 || h == hostRootless)
			}
			if !ok {
				return nil, fmt.Errorf("%s:%d: 6th field %q: want only HOST,... (HOST: %s, %s or %s)", path, n, fields[5], hostV1, hostV2, hostRootless)
			}
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// normalize applies the entries for aspect and side to text, and marks the
// entries that matched: first those whose regexp starts with (?m) to the
// whole text (a difference of several lines, such as a duplicated one),
// then the others line by line.
func normalize(list []normalization, used []bool, mu *sync.Mutex, aspect, side, text string) string {
	applies := func(e normalization) bool { return e.aspect == aspect && (e.side == "both" || e.side == side) }
	mark := func(i int) {
		mu.Lock()
		used[i] = true
		mu.Unlock()
	}
	for i, e := range list {
		if applies(e) && strings.HasPrefix(e.re.String(), "(?m)") && e.re.MatchString(text) {
			mark(i)
			text = e.re.ReplaceAllString(text, e.repl)
		}
	}
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for i, e := range list {
			if !applies(e) || strings.HasPrefix(e.re.String(), "(?m)") || !e.re.MatchString(l) {
				continue
			}
			mark(i)
			l = e.re.ReplaceAllString(l, e.repl)
		}
		if l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
