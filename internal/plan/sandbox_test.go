package plan

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

// TestMain runs these tests, which apply plans to fake trees, where they
// cannot change the machine: see nstest.Sandbox.
func TestMain(m *testing.M) { nstest.Sandbox(m, nil) }

// TestSandboxHolds: the tests run in a mount namespace of their own where
// the machine's directories are read-only and their temp dirs are not.
func TestSandboxHolds(t *testing.T) {
	if !nstest.InSandbox() {
		t.Fatal("the tests run outside the sandbox")
	}
	if self, host := readlink(t, "/proc/self/ns/mnt"), nstest.HostNS(); self == host || host == "" {
		t.Errorf("the tests run in the mount namespace %s; the machine's is %q", self, host)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// Not the test binary's own directory: the go command asks for its
	// test log there when the result may be cached, and the sandbox
	// leaves the directory of every file the go command asks for writable.
	for _, dir := range []string{"/", "/etc", "/usr/sbin", "/var/lib", "/sys/fs/cgroup", "/dev/shm", cwd} {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if err := nstest.CheckReadOnly(dir); err != nil {
			t.Error(err)
		}
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "f"), []byte("x"), 0o644); err != nil {
		t.Errorf("the test's temp dir is not writable: %v", err)
	}
}

func readlink(t *testing.T, p string) string {
	t.Helper()
	s, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
