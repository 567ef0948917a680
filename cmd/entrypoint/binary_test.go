package main

// What every test of the built binary shares: TestMain builds it once, and
// the helpers run it, on this machine or in an empty chroot, and collect
// its exit code and output.

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

// TestMain runs these tests, which run the built binary on trees (and on
// this machine, with --dry-run), where they cannot change the machine:
// see nstest.Sandbox. The binary is built first, outside, where the go
// command can write its cache.
func TestMain(m *testing.M) {
	nstest.Sandbox(m, func(dir string) error {
		return goBuild(filepath.Join(dir, "entrypoint"))
	})
}

// qemuNetlink is why the pod-network preflight is not run under qemu-user.
const qemuNetlink = "qemu-user 7.2 does not translate every rtnetlink message: the pod network's neighbour entry (RTM_NEWNEIGH) fails with EOPNOTSUPP"

// scenarioDir is the fake host whose golden plan the binary must print.
var scenarioDir = filepath.Join(hosttest.HostsDir(), scenarioName)

const scenarioName = "docker-v1-cgroupns"

// goBuild builds the static binary at bin, as the image does.
func goBuild(bin string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build the binary: %w", err)
	}
	cmd := exec.Command(goTool, "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// binaryUnderTest is the built binary (root only), and a context that ends
// after timeout or with the test.
func binaryUnderTest(t *testing.T, timeout time.Duration) (string, context.Context) {
	t.Helper()
	nstest.RequireRoot(t)
	bin := buildEntrypoint(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return bin, ctx
}

// buildEntrypoint returns the binary TestMain built, after checking that
// it is static.
func buildEntrypoint(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(os.Getenv(nstest.SandboxDirEnv), "entrypoint")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("%s is dynamically linked (%s): want a static binary", bin, p.Type)
		}
	}
	return bin
}

type result struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	return runStarted(t, cmd, cmd.Start)
}

// runStarted is runCmd with start starting cmd.
func runStarted(t *testing.T, cmd *exec.Cmd, start func() error) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := start()
	if err == nil {
		err = cmd.Wait()
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("%s: %v", cmd, err)
	}
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	t.Logf("%q: exit %d, %d bytes on stdout, stderr:\n%s", cmd.Args, r.code, len(r.stdout), r.stderr)
	return r
}

// sandboxed runs bin with args in an empty root of its own, in new mount
// and network namespaces. Under an emulator the emulator (static) is
// copied into the root beside the binary, and runs it.
func sandboxed(t *testing.T, ctx context.Context, bin string, args ...string) result {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{"entrypoint": bin}
	argv := append([]string{"/entrypoint"}, args...)
	if emu := nstest.Emulator(); emu != "" {
		files[filepath.Base(emu)] = emu
		argv = append([]string{"/" + filepath.Base(emu)}, argv...)
	}
	for name, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A copy of the sandbox's mount namespace, which is private: nothing
	// the binary mounts propagates to another namespace.
	if !nstest.InSandbox() {
		t.Fatal("sandboxed runs the binary as root in a chroot: only from the sandbox's private mount namespace (nstest.Sandbox)")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Path = argv[0]
	// Dir "/": the working directory, inside the chroot, not the test's
	// outside it.
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Env = []string{}
	r := runStarted(t, cmd, func() error { return nstest.StartIn(cmd, syscall.CLONE_NEWNS|syscall.CLONE_NEWNET) })
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(files) {
		t.Errorf("the refused run changed its root: %d entries, want only the %d files put there", len(entries), len(files))
	}
	return r
}
