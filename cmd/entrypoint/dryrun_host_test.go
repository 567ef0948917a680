package main

// The built binary, run as kind runs it. --dry-run runs on this real machine
// (not only on fake hosts) and must change nothing: the mount table and every file it
// reads are compared before and after. Invocations that must refuse to run
// the steps run in an empty chroot inside new mount and network namespaces,
// so that a regression which ran them anyway could not touch the machine.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/system"
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

// netlinkRules is why the pod-network preflight cannot run under qemu-user.
const netlinkRules = "qemu-user does not translate the netlink messages of routing rules (RTM_GETRULE: EOPNOTSUPP), which the pod-network preflight and the test's snapshot of the machine's network use"

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

// buildEntrypoint returns the binary TestMain built, after checking that
// it is static.
// binaryUnderTest is the built binary (root only), and a context that ends
// after timeout or with the test.
func binaryUnderTest(t *testing.T, timeout time.Duration) (string, context.Context) {
	t.Helper()
	nstest.RequireRoot(t)
	bin := buildEntrypoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return bin, ctx
}

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

func TestEntrypointBinary(t *testing.T) {
	bin, ctx := binaryUnderTest(t, 60*time.Second)
	var stepNames []string
	for _, s := range boot.Steps() {
		stepNames = append(stepNames, s.Name)
	}

	t.Run("dry-run on this machine", func(t *testing.T) {
		before := hostState(t)
		r := runCmd(t, nstest.Command(ctx, bin, "--dry-run"))
		if r.code != 0 {
			t.Fatalf("exit %d, want 0; stderr:\n%s", r.code, r.stderr)
		}
		_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
		cgroup := map[bool]string{true: "v2", false: "v1"}[err == nil]
		uidMap, err := os.ReadFile("/proc/self/uid_map")
		if err != nil {
			t.Fatal(err)
		}
		userNS := strings.Join(strings.Fields(string(uidMap)), " ") != "0 0 4294967295"
		if want := fmt.Sprintf("facts:\n  user namespace: %t\n  cgroup: %s\n", userNS, cgroup); !strings.HasPrefix(r.stdout, want) {
			t.Errorf("stdout does not start with the facts %q:\n%s", want, r.stdout)
		}
		checkSteps(t, r.stdout, stepNames)
		if strings.Contains(r.stdout, "FATAL") {
			t.Errorf("a step is fatal on this machine:\n%s", r.stdout)
		}
		if diff := cmp.Diff(before, hostState(t)); diff != "" {
			t.Errorf("--dry-run changed the machine (-before +after):\n%s", diff)
		}
	})

	t.Run("dry-run json", func(t *testing.T) {
		before := hostState(t)
		r := runCmd(t, nstest.Command(ctx, bin, "--dry-run", "--log-format", "json"))
		if r.code != 0 {
			t.Fatalf("exit %d, want 0; stderr:\n%s", r.code, r.stderr)
		}
		var report struct {
			UserNS *bool  `json:"user_namespace"`
			Cgroup string `json:"cgroup"`
			Steps  []struct {
				Step    string            `json:"step"`
				Actions []json.RawMessage `json:"actions"`
			} `json:"steps"`
		}
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		if err := dec.Decode(&report); err != nil {
			t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
		}
		if dec.More() {
			t.Errorf("stdout holds more than one JSON value:\n%s", r.stdout)
		}
		var got []string
		for _, s := range report.Steps {
			got = append(got, s.Step)
			if s.Actions == nil {
				t.Errorf("step %s: no actions array", s.Step)
			}
		}
		if report.UserNS == nil || report.Cgroup == "" {
			t.Errorf("the report lacks the shared facts: %s", r.stdout)
		}
		if diff := cmp.Diff(stepNames, got); diff != "" {
			t.Errorf("steps in the JSON report (-want +got):\n%s", diff)
		}
		for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Errorf("stderr line is not JSON: %q", line)
			}
		}
		if diff := cmp.Diff(before, hostState(t)); diff != "" {
			t.Errorf("--dry-run changed the machine (-before +after):\n%s", diff)
		}
	})

	t.Run("dry-run of the fake host matches its golden plan", func(t *testing.T) {
		root := hosttest.Host(t, scenarioName)
		// The golden was rendered with the test randomness (boot's testSeed).
		hosttest.AddFiles(t, root, map[string]string{system.ProbeDir + "/random": "kind"})
		want, err := os.ReadFile(filepath.Join(scenarioDir, "plan.golden"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := nstest.Command(ctx, bin, "--dry-run", "--root", root)
		cmd.Env = []string{} // the fake host's environment is its .host/environ
		r := runCmd(t, cmd)
		wantCode := 0
		if bytes.Contains(want, []byte("  FATAL: ")) {
			wantCode = -1 // any failure
		}
		if (wantCode == 0) != (r.code == 0) {
			t.Errorf("exit %d; the golden plan has a fatal step: %t", r.code, wantCode != 0)
		}
		if diff := cmp.Diff(string(want), r.stdout); diff != "" {
			t.Errorf("stdout differs from %s/plan.golden (-want +got):\n%s", scenarioDir, diff)
		}
	})

	t.Run("no INIT without --dry-run", func(t *testing.T) {
		r := sandboxed(t, ctx, bin)
		if r.code != 2 || !strings.Contains(r.stderr, "usage: entrypoint") {
			t.Errorf("exit %d, stderr %q; want 2 and the usage", r.code, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("stdout %q, want nothing", r.stdout)
		}
	})

	t.Run("--root without --dry-run", func(t *testing.T) {
		r := sandboxed(t, ctx, bin, "--root", "/", "/sbin/init")
		if r.code != 2 || !strings.Contains(r.stderr, "--root") {
			t.Errorf("exit %d, stderr %q; want 2 and a message naming --root", r.code, r.stderr)
		}
	})

	t.Run("chroot keeps the working directory inside", func(t *testing.T) {
		// A relative --root resolves from the working directory: the
		// package's, outside the chroot, unless the run starts in "/".
		// Before Dir was set this printed the scenario's plan, read
		// from outside the chroot.
		r := sandboxed(t, ctx, bin, "--dry-run", "--root", scenarioDir+"/root")
		if r.code == 0 || strings.Contains(r.stdout, "facts:") {
			t.Errorf("exit %d: the chrooted run read %s outside its root:\n%.300s", r.code, scenarioDir, r.stdout)
		}
	})

	t.Run("--version", func(t *testing.T) {
		r := sandboxed(t, ctx, bin, "--version")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "entrypoint ") {
			t.Errorf("exit %d, stdout %q; want 0 and the version", r.code, r.stdout)
		}
	})
}

// checkSteps checks that out holds "step N NAME:" for every step, in order.
func checkSteps(t *testing.T, out string, names []string) {
	t.Helper()
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "step ") && strings.HasSuffix(line, ":") {
			got = append(got, strings.TrimSuffix(line, ":"))
		}
	}
	var want []string
	for i, n := range names {
		want = append(want, fmt.Sprintf("step %d %s", i+1, n))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps in the dry run (-want +got):\n%s\n%s", diff, out)
	}
}

// hostState describes what a dry run reads and a real run would change: the
// mount table, the files of the steps (content hash, mode, owner, or
// absence), the mount binaries, and /proc/cgroups.
func hostState(t *testing.T) map[string]string {
	t.Helper()
	s := map[string]string{}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	s["/proc/self/mountinfo"] = string(b)
	for _, p := range []string{
		"/etc/containerd/config.toml",
		"/etc/systemd/system.conf.d",
		"/etc/systemd/system/multi-user.target.wants",
		"/etc/machine-id",
		"/var/lib/dbus/machine-id",
		"/etc/resolv.conf",
		"/etc/resolv.conf.original",
		"/usr/bin/mount",
		"/usr/bin/umount",
		"/kind",
	} {
		describePath(t, s, p)
	}
	// Cgroups come and go on a busy machine (other tests, containers): the
	// num_cgroups column is left out; a bind over /proc/cgroups shows in the
	// mount table, and a changed controller list in the other columns.
	b, err = os.ReadFile("/proc/cgroups")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 {
			f = append(f[:2], f[3])
		}
		rows = append(rows, strings.Join(f, " "))
	}
	s["/proc/cgroups (no num_cgroups)"] = strings.Join(rows, "\n")
	return s
}

// describePath records p and, for a directory, everything in it.
func describePath(t *testing.T, s map[string]string, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		s[p] = "absent"
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	desc := fmt.Sprintf("%v %d:%d", fi.Mode(), st.Uid, st.Gid)
	switch {
	case fi.Mode().IsRegular():
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		desc += fmt.Sprintf(" sha256 %x", sha256.Sum256(b))
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			t.Fatal(err)
		}
		desc += " -> " + target
	case fi.IsDir():
		names := hosttest.DirNames(t, p)
		for _, name := range names {
			describePath(t, s, filepath.Join(p, name))
		}
		desc += " [" + strings.Join(names, " ") + "]"
	}
	s[p] = desc
}
