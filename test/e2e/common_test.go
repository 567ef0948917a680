//go:build e2e || e2ebench

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// What the e2e tier (tag e2e) and the benchmarks (tag e2ebench) share.

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// mustDuration parses a duration from the tier's environment; a typo must
// stop the run, not become a zero limit.
func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		panic(fmt.Sprintf("not a positive duration: %q", s))
	}
	return d
}

// dockerCmd runs the docker CLI with a fixed argv and returns its stdout;
// the error carries stderr.
func dockerCmd(timeout time.Duration, args ...string) (string, error) {
	return dockerStdin(timeout, nil, args...)
}

func dockerStdin(timeout time.Duration, stdin []byte, args ...string) (string, error) {
	return tier.Run(timeout, stdin, "docker", args...)
}

// mustDocker is dockerCmd that fails the test on error.
func mustDocker(t testing.TB, args ...string) string {
	t.Helper()
	return tier.MustRun(t, 2*time.Minute, "docker", args...)
}

// writeBuildContext writes a docker build context: each file of files in
// dir, "entrypoint" and scripts (*.sh) executable.
func writeBuildContext(dir string, files map[string]string) error {
	for name, data := range files {
		mode := os.FileMode(0o644)
		if name == "entrypoint" || strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), mode); err != nil {
			return err
		}
	}
	return nil
}
