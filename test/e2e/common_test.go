//go:build e2e || e2ebench

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What the e2e tier (tag e2e) and the benchmarks (tag e2ebench) share.

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func newRunID() string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// kindRunArgs are the flags kind v0.23.0 (pkg/cluster/internal/providers/
// docker, provision.go) gives `docker run` for a node, less labels and
// ports. kind always passes --tty; the benchmarks also boot without it.
func kindRunArgs(name, networkName, cgroupns string, tty bool) []string {
	args := []string{
		"--detach",
		"--hostname", name,
		"--network", networkName,
		"--privileged",
		"--security-opt", "seccomp=unconfined",
		"--security-opt", "apparmor=unconfined",
		"--tmpfs", "/tmp",
		"--tmpfs", "/run",
		"--volume", "/var",
		"--volume", "/lib/modules:/lib/modules:ro",
		"--restart=on-failure:1",
		"--init=false",
		"--cgroupns=" + cgroupns,
	}
	if tty {
		args = append(args, "--tty")
	}
	return args
}

// dockerCmd runs the docker CLI with a fixed argv and returns its stdout;
// the error carries stderr.
func dockerCmd(timeout time.Duration, args ...string) (string, error) {
	return dockerStdin(timeout, nil, args...)
}

func dockerStdin(timeout time.Duration, stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
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
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// mustDocker is dockerCmd that fails the test on error.
func mustDocker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := dockerCmd(2*time.Minute, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeBuildContext writes a docker build context: each file of files in
// dir, "entrypoint" executable.
func writeBuildContext(dir string, files map[string]string) error {
	for name, data := range files {
		mode := os.FileMode(0o644)
		if name == "entrypoint" {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), mode); err != nil {
			return err
		}
	}
	return nil
}
