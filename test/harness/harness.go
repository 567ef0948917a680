// Package harness holds what the Docker-driven test tiers share (test/e2e,
// test/cluster): the docker CLI with a fixed argv and a timeout, and kind's
// CLI built from the Go module proxy.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Docker runs the docker CLI with args, feeding it stdin when not nil, and
// returns its stdout; the error carries stderr.
func Docker(timeout time.Duration, stdin []byte, args ...string) (string, error) {
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

// KindBinary returns kind's CLI at version, built from the Go module proxy
// once into cacheDir/kind-VERSION, and whether it was built now.
func KindBinary(cacheDir, version string) (bin string, built bool, err error) {
	dir := filepath.Join(cacheDir, "kind-"+version)
	bin = filepath.Join(dir, "kind")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, false, nil
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = "/usr/local/go/bin/go"
	}
	tmp, err := os.MkdirTemp("", "kind-install-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "install", "sigs.k8s.io/kind@"+version)
	cmd.Dir = tmp // outside this module: go install pkg@version needs none
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", false, fmt.Errorf("go install sigs.k8s.io/kind@%s: %w\n%s", version, err, out)
	}
	return bin, true, nil
}
