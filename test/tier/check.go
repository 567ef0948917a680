package tier

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// ReachedMultiUser is the part of KindWaitRe that a node on a cgroup v2
// host must print: systemd reached multi-user.target.
const ReachedMultiUser = `Reached target .*Multi-User System.*`

// KindWaitRe is what kind's CLI waits for in a node's log before it goes
// on (pkg/cluster/internal/providers/common, NodeReachedCgroupsReadyRegexp:
// the same in every provider, from v0.23.0 to v0.30.0).
var KindWaitRe = regexp.MustCompile(ReachedMultiUser + `|detected cgroup v1`)

// NoDockerDNS starts the line enable_network_magic logs when a node has no
// trace of Docker's embedded DNS (internal/network, noEmbeddedDNS): under
// podman and nerdctl it says why it leaves the node's DNS alone.
const NoDockerDNS = "INFO: no nameserver 127.0.0.11 in /etc/resolv.conf and no "

// CheckNode asserts what a node must show whatever its provider: systemd
// `running` within limit with no failed unit; the line kind waits for and
// `detected cgroup v1` (v2 on a v2 host) in its log, and no ERROR: line; no
// `fail` row from `entrypoint check --json`, and at least one `pass` row (a
// warn row is logged). It
// returns the log's INFO:/WARN:/ERROR: lines for the provider's own checks.
// A node whose systemd never gets to running ends the test.
func CheckNode(t testing.TB, n Node, limit time.Duration) []string {
	t.Helper()
	took, problem := n.PollRunning(limit)
	if problem != "" {
		t.Fatalf("%s: %s", n.Name, problem)
	}
	t.Logf("%s: systemd running after %v", n.Name, took.Round(time.Millisecond))
	NoFailedUnits(t, n)

	log, err := n.Log()
	if err != nil {
		t.Fatal(err)
	}
	lines := EntrypointLines(log)
	for _, l := range lines {
		if strings.HasPrefix(l, "ERROR: ") {
			t.Errorf("%s: log: %s", n.Name, l)
		}
	}
	if !KindWaitRe.MatchString(log) {
		t.Errorf("%s: the log never matches kind's %q:\n%s", n.Name, KindWaitRe, log)
	}
	version := "INFO: detected cgroup v1"
	if CgroupV2() {
		version = "INFO: detected cgroup v2"
	}
	if !slices.Contains(lines, version) {
		t.Errorf("%s: no line %q in:\n%s", n.Name, version, strings.Join(lines, "\n"))
	}

	// entrypoint check: no fail row (it exits 1 on a warn).
	out, _ := n.ExecErr("/usr/local/bin/entrypoint", "check", "--json")
	var rows []struct{ Name, Status, Observed, Hint string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) == 0 {
		t.Fatalf("%s: entrypoint check --json: %v\n%s", n.Name, err, out)
	}
	passed := 0
	for _, r := range rows {
		switch r.Status {
		case "pass":
			passed++
		case "fail":
			t.Errorf("%s: check row %s fails: %s (%s)", n.Name, r.Name, r.Observed, r.Hint)
		case "warn":
			t.Logf("%s: check row %s warns: %s", n.Name, r.Name, r.Observed)
		}
	}
	if passed == 0 {
		t.Errorf("%s: entrypoint check --json: no row passes:\n%s", n.Name, out)
	}
	return lines
}

// LeavesDNSAlone asserts what a node without Docker's embedded DNS
// (podman's, nerdctl's) must show: step 10 said why it leaves the DNS
// alone (lines are CheckNode's); resolv.conf keeps the nameservers the
// engine wrote (those of resolv.conf.original) and names no 127.0.0.11;
// iptables has no Docker DNS rule. It returns the node's resolv.conf.
func LeavesDNSAlone(t testing.TB, n Node, lines []string) string {
	t.Helper()
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, NoDockerDNS) }) {
		t.Errorf("%s: enable_network_magic does not say why it leaves the node's DNS alone (%q...):\n%s", n.Name, NoDockerDNS, strings.Join(lines, "\n"))
	}
	resolv, err := n.ExecErr("cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	orig, err := n.ExecErr("cat", "/etc/resolv.conf.original")
	if err != nil {
		t.Fatal(err)
	}
	if was, now := ResolvLines(orig, "nameserver"), ResolvLines(resolv, "nameserver"); !slices.Equal(was, now) || len(now) == 0 {
		t.Errorf("%s: nameservers %q, want the engine's %q (resolv.conf.original)", n.Name, now, was)
	}
	if strings.Contains(resolv, "127.0.0.11") {
		t.Errorf("%s: resolv.conf names Docker's embedded DNS:\n%s", n.Name, resolv)
	}
	rules, err := n.ExecErr("iptables-save", "-t", "nat")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rules, "127.0.0.11") || strings.Contains(rules, "DOCKER_OUTPUT") {
		t.Errorf("%s: Docker DNS rules in a node without Docker's DNS:\n%s", n.Name, rules)
	}
	return resolv
}

// ResolvLines returns the lines of resolv.conf that start with the
// keyword, blanks collapsed.
func ResolvLines(resolv, keyword string) []string {
	var out []string
	for _, l := range strings.Split(resolv, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == keyword {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// RequireLines fails t unless text holds each wanted line (after
// trimming); what names the text.
func RequireLines(t testing.TB, what, text string, want ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("%s: no line %q in:\n%s", what, w, text)
		}
	}
}

// EntrypointLines returns the lines of a node's log that the entrypoint
// writes (INFO:, WARN:, ERROR:), and those that start with one of more.
func EntrypointLines(log string, more ...string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "INFO: ") || strings.HasPrefix(l, "WARN: ") || strings.HasPrefix(l, "ERROR: ") ||
			slices.ContainsFunc(more, func(p string) bool { return strings.HasPrefix(l, p) }) {
			out = append(out, l)
		}
	}
	return out
}
