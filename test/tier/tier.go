package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Run runs a CLI with a fixed argv (and stdin, when not nil) and returns
// its stdout; the error carries stderr.
func Run(timeout time.Duration, stdin []byte, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", timeout, ctx.Err())
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// MustRun is Run, without stdin, that fails the test on error.
func MustRun(t testing.TB, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	out, err := Run(timeout, nil, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Logs runs ENGINE logs ARGS... (docker or podman) and returns the
// container's log: both of its streams, in the order the engine wrote them.
// Without a tty a node's entrypoint logs to stderr, which `logs` writes to
// its own stderr: reading stdout alone loses those lines.
func Logs(timeout time.Duration, engine string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, engine, append([]string{"logs"}, args...)...).CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", timeout, ctx.Err())
	}
	if err != nil {
		return string(out), fmt.Errorf("%s logs %s: %w: %s", engine, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// OverBudget reports, on stderr, how long the tier has taken since the Unix
// time in the environment variable startEnv (its run.sh exports it, so
// image builds count), and whether that is over budget. Without the
// variable it says nothing and returns false.
func OverBudget(name, startEnv string, budget time.Duration) bool {
	var start int64
	if _, err := fmt.Sscan(os.Getenv(startEnv), &start); err != nil {
		return false
	}
	took := time.Since(time.Unix(start, 0)).Round(time.Second)
	fmt.Fprintf(os.Stderr, "%s: tier took %v so far (budget %v)\n", name, took, budget)
	if took > budget {
		fmt.Fprintf(os.Stderr, "FAIL: the %s tier took %v, over its %v budget\n", name, took, budget)
		return true
	}
	return false
}

// KindCreateWithoutKubeadm runs `kind create cluster` with args and env
// (kind's flags: --retain keeps the nodes to look at) and returns its
// output. The node image has no kubeadm, so creation must fail, after
// "Preparing nodes" (kind saw the entrypoint's log line in every node) and
// "Writing configuration", at kubeadm init; want are more strings the
// output must hold (how the engine words the missing kubeadm).
func KindCreateWithoutKubeadm(t testing.TB, kind string, env []string, args []string, want ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kind, append([]string{"create", "cluster"}, args...)...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("kind create cluster (%v):\n%s", time.Since(start).Round(time.Millisecond), out.String())
	var exit *exec.ExitError
	if err == nil {
		t.Fatal("kind create cluster succeeded, but the test image has no kubeadm: what ran?")
	} else if !errors.As(err, &exit) {
		t.Fatalf("kind create cluster: %v", err)
	}
	text := out.String()
	for _, w := range append([]string{"✓ Preparing nodes", "✓ Writing configuration", "✗ Starting control-plane"}, want...) {
		if !strings.Contains(text, w) {
			t.Errorf("kind output: %q not found", w)
		}
	}
	for _, bad := range []string{"✗ Preparing nodes", "✗ Writing configuration"} {
		if strings.Contains(text, bad) {
			t.Errorf("kind output has %q", bad)
		}
	}
	return text
}
