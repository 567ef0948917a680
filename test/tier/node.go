package tier

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// Node is a node container of an engine ("docker" or "podman"): what every
// tier runs in it or asks about it. The tiers' own node types embed it.
type Node struct {
	Engine string
	Name   string
}

// ExecErr runs argv in the node (a minute at most) and returns its stdout;
// the error carries stderr.
func (n Node) ExecErr(argv ...string) (string, error) {
	return n.ExecWithin(time.Minute, argv...)
}

// ExecWithin is ExecErr with a time limit of its own, for a read that is
// slow by its nature.
func (n Node) ExecWithin(limit time.Duration, argv ...string) (string, error) {
	return Run(limit, nil, n.Engine, append([]string{"exec", n.Name}, argv...)...)
}

// Log returns the container's log, both streams (see Logs), without a
// tty's carriage returns; args go before the name (--tail N).
func (n Node) Log(args ...string) (string, error) {
	out, err := Logs(time.Minute, n.Engine, append(args, n.Name)...)
	return strings.ReplaceAll(out, "\r", ""), err
}

// Dump writes what explains a failure through logf: the log's last 300
// lines, the failed units and the journal's tail.
func (n Node) Dump(logf func(format string, args ...any)) {
	logs, err := n.Log("--tail", "300")
	logf("=== %s: %s logs (err %v)\n%s", n.Name, n.Engine, err, logs)
	for _, argv := range [][]string{
		{"systemctl", "--failed", "--no-pager"},
		{"journalctl", "--no-pager", "-n", "150"},
	} {
		out, err := n.ExecErr(argv...)
		logf("=== %s: %s (err %v)\n%s", n.Name, strings.Join(argv, " "), err, out)
	}
}

// FailedUnits returns systemd's failed units in the node, one a line,
// without a legend: "" when none failed.
func (n Node) FailedUnits() (string, error) {
	return n.ExecErr("systemctl", "--failed", "--no-legend", "--plain", "--no-pager")
}

// NoFailedUnits fails t when systemd in the node n has a failed unit, or
// cannot say.
func NoFailedUnits(t testing.TB, n Node) {
	t.Helper()
	if failed, err := n.FailedUnits(); err != nil || strings.TrimSpace(failed) != "" {
		t.Errorf("%s: failed units (err %v):\n%s", n.Name, err, failed)
	}
}

// PollRunning waits up to limit for `systemctl is-system-running` in the
// node to say running, and returns how long that took, or what went wrong
// ("" when nothing did). degraded ends the wait at once, naming the failed
// units; so does the container's exit. Safe to call from any goroutine.
func (n Node) PollRunning(limit time.Duration) (time.Duration, string) {
	start := time.Now()
	var state string
	for time.Since(start) < limit {
		out, _ := Run(20*time.Second, nil, n.Engine, "exec", n.Name, "systemctl", "is-system-running")
		switch state = strings.TrimSpace(out); state {
		case "running":
			return time.Since(start), ""
		case "degraded":
			failed, _ := n.FailedUnits()
			return 0, "systemd degraded, failed units:\n" + failed
		}
		if st, err := Run(20*time.Second, nil, n.Engine, "inspect", "-f", "{{.State.Status}}", n.Name); err == nil && strings.TrimSpace(st) == "exited" {
			return 0, fmt.Sprintf("container exited before systemd was running (last state %q)", state)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0, fmt.Sprintf("systemd not running after %v (last state %q)", limit, state)
}

// MustEnv returns the environment variable key, and fails the test when
// it is unset or empty (RequireEnv).
func MustEnv(t testing.TB, key, hint string) string {
	t.Helper()
	v, err := RequireEnv(key, hint)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// RequireEnv returns the environment variable key, or an error when it is
// unset or empty; hint says which script sets it.
func RequireEnv(key, hint string) (string, error) {
	v := os.Getenv(key)
	if v == "" {
		return "", fmt.Errorf("%s is not set: %s", key, hint)
	}
	return v, nil
}

// RunID returns a short random id for the names of one run's containers
// and networks.
func RunID() string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// CgroupV2 reports whether this host runs the unified cgroup hierarchy
// only.
func CgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// TestNode is a Node that a test drives: what goes wrong in it fails T.
type TestNode struct {
	Node
	T testing.TB
}

// NewTestNode is the node NAME of ENGINE ("docker" or "podman") for t.
func NewTestNode(t testing.TB, engine, name string) TestNode {
	return TestNode{Node: Node{Engine: engine, Name: name}, T: t}
}

// WaitRunning waits up to limit for `systemctl is-system-running` to say
// running (PollRunning), logs how long that took and returns it; it fails
// the test when systemd does not get there.
func (n TestNode) WaitRunning(limit time.Duration) time.Duration {
	n.T.Helper()
	took, problem := n.PollRunning(limit)
	if problem != "" {
		n.T.Fatalf("%s: %s", n.Name, problem)
	}
	n.T.Logf("%s: systemd running after %v", n.Name, took.Round(time.Millisecond))
	return took
}

// MustExec is ExecErr that fails the test on error.
func (n TestNode) MustExec(argv ...string) string {
	n.T.Helper()
	out, err := n.ExecErr(argv...)
	if err != nil {
		n.T.Fatal(err)
	}
	return out
}

// MustLog is Log that fails the test on error.
func (n TestNode) MustLog() string {
	n.T.Helper()
	out, err := n.Log()
	if err != nil {
		n.T.Fatal(err)
	}
	return out
}

// LogDump logs what explains a failure (Dump) in the test's log.
func (n TestNode) LogDump() {
	n.T.Helper()
	n.Dump(n.T.Logf)
}
