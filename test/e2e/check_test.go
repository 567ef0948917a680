//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// netState is what the pod-network preflight must leave as it found it.
func (n *node) netState() map[string]string {
	n.T.Helper()
	s := map[string]string{}
	for _, argv := range [][]string{
		{"ip", "-o", "link"}, {"ip", "-o", "addr"}, {"ip", "route", "show", "table", "all"},
		{"ip", "-6", "route", "show", "table", "all"}, {"ip", "rule"}, {"ip", "-all", "netns", "list"},
	} {
		out, err := n.ExecErr(argv...)
		s[strings.Join(argv, " ")] = out + errString(err)
	}
	return s
}

func errString(err error) string {
	if err != nil {
		return " (error: " + err.Error() + ")"
	}
	return ""
}

// TestCheckInNode runs `entrypoint check --json` inside a booted node: one
// JSON array of rows, the exit code the worst status, the pod-network
// preflight passing, and nothing of the node changed.
func TestCheckInNode(t *testing.T) {
	t.Parallel()
	net := newNetwork(t, "check")
	n := startNode(t, net, "check", nodeOpts{})
	n.WaitRunning(bootLimit)
	before, netBefore := n.state(), n.netState()

	out, err := n.ExecErr("/usr/local/bin/entrypoint", "check", "--json")
	code := 0
	if err != nil {
		m := regexp.MustCompile(`exit status (\d+)`).FindStringSubmatch(err.Error())
		if m == nil {
			t.Fatalf("entrypoint check: %v\n%s", err, out)
		}
		code = int(m[1][0] - '0')
	}
	var rows []struct{ Name, Status, Observed, Hint string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("check --json is not a JSON array of rows: %v\n%s", err, out)
	}
	worst, status := 0, map[string]string{}
	for _, r := range rows {
		status[r.Name] = r.Status
		switch r.Status {
		case "warn":
			worst = max(worst, 1)
		case "fail":
			worst = 2
		case "pass":
		default:
			t.Errorf("row %s: status %q", r.Name, r.Status)
		}
	}
	if code != worst {
		t.Errorf("exit %d, but the worst row says %d", code, worst)
	}
	for _, name := range []string{"cgroupns", "cgroup-mounts", "sys", "mount-propagation", "overlay", "plan", "pod-network"} {
		if status[name] != "pass" {
			t.Errorf("row %s: %q, want pass\n%s", name, status[name], out)
		}
	}
	if diff := cmp.Diff(before, n.state()); diff != "" {
		t.Errorf("check changed the node (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(netBefore, n.netState()); diff != "" {
		t.Errorf("check left network state behind (-before +after):\n%s", diff)
	}
}

// identities masks what a replay draws anew (machine-ids, UUIDs) and the
// wording of failed name lookups, which is the resolver's, not the plan's
// (a capture records that a name did not resolve, not how it was said).
var identities = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}|sha256 [0-9a-f]{12}|(lookup|address) [^ ]+( on [^ ]+)?: (no such host|no suitable address found)`)

// liveCounts masks the num_cgroups column of /proc/cgroups in the fake
// copy fix_cgroup writes (rendered quoted, with \t and \n escapes): the
// kernel's live count of each hierarchy's cgroups, which moves while
// systemd runs, between the node's plan and capture's read of the file.
var liveCounts = regexp.MustCompile(`(\\t\d+\\t)\d+(\\t[01]\\n)`)

// TestCaptureReplays captures a booted node, extracts the archive on the
// host and replays it with --dry-run --root: the same plan the node printed.
func TestCaptureReplays(t *testing.T) {
	t.Parallel()
	net := newNetwork(t, "capture")
	n := startNode(t, net, "capture", nodeOpts{})
	n.WaitRunning(bootLimit)
	n.MustExec("/usr/local/bin/entrypoint", "capture", "-o", "/root/capture.tar.gz") // not /tmp: docker cp cannot see a tmpfs
	dir := t.TempDir()
	mustDocker(t, "cp", n.Name+":/root/capture.tar.gz", filepath.Join(dir, "capture.tar.gz"))
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-xzpf", filepath.Join(dir, "capture.tar.gz"), "-C", root).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(root, ".host", "plan"))
	if err != nil {
		t.Fatalf("the capture has no .host/plan: %v", err)
	}
	bin, err := filepath.Abs("../../bin/entrypoint")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--dry-run", "--root", root)
	cmd.Env = []string{}
	cmd.WaitDelay = 10 * time.Second
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, got)
	}
	mask := func(plan []byte) string {
		return liveCounts.ReplaceAllString(identities.ReplaceAllString(string(plan), "ID"), "${1}N${2}")
	}
	if diff := cmp.Diff(mask(want), mask(got)); diff != "" {
		t.Errorf("the replay plans differently from the node (-node +replay):\n%s", diff)
	}
}
