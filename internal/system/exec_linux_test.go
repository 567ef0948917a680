package system_test

// Exec is tested across a real execve: the test runs this test binary as a
// helper that soils its process the way a container runtime or a careless
// parent can (a descriptor inherited without close-on-exec, more opened
// without it, SIGHUP ignored, SIGUSR1 blocked) and then calls Exec on the
// test binary once more, in report mode: what arrives there is what init
// would get. A control helper makes the same mess and calls execve itself,
// to show that the report sees each leak.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

// helperEnv selects what the test binary does instead of testing:
// "exec" (soil, then system.Exec), "raw-exec" (soil, then execve directly),
// "report" (print what the process got, as JSON), "environ" (print
// system.Environ, as JSON).
const helperEnv = "ENTRYPOINT_SYSTEM_EXEC_HELPER"

// leakedFD is where the helper duplicates a descriptor without O_CLOEXEC.
const leakedFD = 42

// targetArgs and targetEnv are what the helper passes to the report: they
// must arrive byte for byte.
var (
	targetArgs = []string{"-test.run=^$", "plain", "with  spaces", "", "--", "-x", "ünïcødé", "new\nline", "$HOME", `"quoted"`}
	targetEnv  = []string{
		helperEnv + "=report",
		"PLAIN=1",
		"WITH_EQUALS=a=b=c",
		"EMPTY=",
		"SPACES=  two  spaces ",
		"NEWLINE=line1\nline2",
		"UTF8=ünïcødé",
		"PATH=/nonexistent",
	}
)

// execReport is what the report helper prints.
type execReport struct {
	FDs     []int    // open descriptors, listed without opening any other
	Targets []string // what each of FDs refers to
	// Inherited are the FDs without close-on-exec: those that came through
	// execve. The others the report's own process opened (the one that
	// lists /proc/self/fd, and the Go runtime's cgroup CPU limit files).
	Inherited []int
	ListingFD int      // the one that listed /proc/self/fd
	SigIgn    uint64   // from /proc/self/status
	SigBlk    uint64   // from /proc/self/status
	Argv      []string // /proc/self/cmdline
	Env       []string // /proc/self/environ
}

func helperMain(mode string) int {
	switch mode {
	case "report":
		return report()
	case "exec", "raw-exec":
		return soilAndExec(mode == "raw-exec")
	case "environ":
		// As the entrypoint: variables are read before init's
		// environment is taken.
		os.Getenv("PATH")
		if err := json.NewEncoder(os.Stdout).Encode(system.Environ()); err != nil {
			fmt.Fprintln(os.Stderr, "environ:", err)
			return 4
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "%s=%q: unknown mode\n", helperEnv, mode)
	return 2
}

func soilAndExec(raw bool) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "helper: "+format+"\n", args...)
		return 3
	}
	// The signal mask is per thread: block on the thread that will exec.
	runtime.LockOSThread()
	// fd 3 came from the parent (ExtraFiles) without close-on-exec.
	fd, err := unix.Open("/dev/null", unix.O_RDONLY, 0)
	if err != nil {
		return fail("open /dev/null: %v", err)
	}
	if err := unix.Dup3(fd, leakedFD, 0); err != nil {
		return fail("dup3: %v", err)
	}
	for _, fd := range []int{3, fd, leakedFD} {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC != 0 {
			return fail("fd %d: flags %#x, %v: want open without close-on-exec", fd, fl, err)
		}
	}
	signal.Ignore(syscall.SIGHUP)
	var set unix.Sigset_t
	set.Val[0] = sigBit(unix.SIGUSR1)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
		return fail("block SIGUSR1: %v", err)
	}
	ign, blk, err := sigStatus("/proc/thread-self/status")
	if err != nil {
		return fail("%v", err)
	}
	if ign&sigBit(unix.SIGHUP) == 0 || blk&sigBit(unix.SIGUSR1) == 0 {
		return fail("SigIgn %#x SigBlk %#x: want SIGHUP ignored and SIGUSR1 blocked before exec", ign, blk)
	}
	exe, err := os.Executable()
	if err != nil {
		return fail("%v", err)
	}
	argv := append([]string{exe}, targetArgs...)
	if raw {
		err = unix.Exec(exe, argv, targetEnv)
	} else {
		err = system.Exec(argv, targetEnv)
	}
	return fail("exec: %v", err)
}

// report lists the open descriptors first, with raw system calls, so that
// nothing of the Go runtime or of this test opens one before.
func report() int {
	var rep execReport
	fd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return 4
	}
	rep.ListingFD = fd
	buf := make([]byte, 8192)
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "report: getdents:", err)
			return 4
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	unix.Close(fd)
	for _, name := range names {
		n, err := strconv.Atoi(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "report: /proc/self/fd/%s\n", name)
			return 4
		}
		rep.FDs = append(rep.FDs, n)
	}
	slices.Sort(rep.FDs)
	for _, n := range rep.FDs {
		if n == rep.ListingFD {
			continue
		}
		fl, err := unix.FcntlInt(uintptr(n), unix.F_GETFD, 0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "report: fd %d: %v\n", n, err)
			return 4
		}
		if fl&unix.FD_CLOEXEC == 0 {
			rep.Inherited = append(rep.Inherited, n)
		}
	}
	for _, n := range rep.FDs {
		target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(n))
		if err != nil {
			target = err.Error()
		}
		rep.Targets = append(rep.Targets, target)
	}
	if rep.SigIgn, rep.SigBlk, err = sigStatus("/proc/self/status"); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return 4
	}
	for _, f := range []struct {
		path string
		out  *[]string
	}{{"/proc/self/cmdline", &rep.Argv}, {"/proc/self/environ", &rep.Env}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			return 4
		}
		*f.out = strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return 4
	}
	return 0
}

func sigBit(sig syscall.Signal) uint64 { return 1 << (uint(sig) - 1) }

// sigStatus reads the SigIgn and SigBlk masks of a /proc status file.
func sigStatus(path string) (ign, blk uint64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		var dst *uint64
		switch k {
		case "SigIgn":
			dst = &ign
		case "SigBlk":
			dst = &blk
		default:
			continue
		}
		if *dst, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
			return 0, 0, fmt.Errorf("%s: %s: %w", path, k, err)
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("%s: no SigIgn or SigBlk line", path)
	}
	return ign, blk, nil
}

// foreignExec is why the exec tests cannot run under qemu-user.
const foreignExec = "the helper execs the test binary from inside the emulated process, and without binfmt_misc (the host kernel's, which no test registers) the kernel refuses a foreign binary (ENOEXEC)"

// runHelper runs the test binary as a helper in mode, handing it fd 3
// without close-on-exec, and decodes the report of the process it execs.
func runHelper(t *testing.T, mode string) execReport {
	t.Helper()
	nstest.SkipEmulated(t, foreignExec)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	inherited, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer inherited.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.ExtraFiles = []*os.File{inherited}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s: %v\nstderr:\n%s", mode, err, stderr.Bytes())
	}
	var rep execReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("helper %s: report %q: %v\nstderr:\n%s", mode, out, err, stderr.Bytes())
	}
	t.Logf("report after %s: fds %v %q, inherited %v, SigIgn %016x, SigBlk %016x", mode, rep.FDs, rep.Targets, rep.Inherited, rep.SigIgn, rep.SigBlk)
	return rep
}

// TestExecCleanSlate: after Exec, init has only descriptors 0-2, no signal
// ignored or blocked, and exactly the argv and environment given.
func TestExecCleanSlate(t *testing.T) {
	rep := runHelper(t, "exec")
	if want := []int{0, 1, 2}; !slices.Equal(rep.Inherited, want) {
		t.Errorf("descriptors that came through exec: %v, want %v (all open: %v %q)", rep.Inherited, want, rep.FDs, rep.Targets)
	}
	if !slices.Contains(rep.FDs, rep.ListingFD) {
		t.Errorf("the report's listing of /proc/self/fd %v misses its own fd %d", rep.FDs, rep.ListingFD)
	}
	if rep.SigIgn != 0 {
		t.Errorf("ignored signals after exec: SigIgn %016x, want none", rep.SigIgn)
	}
	if rep.SigBlk != 0 {
		t.Errorf("blocked signals after exec: SigBlk %016x, want none", rep.SigBlk)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append([]string{exe}, targetArgs...), rep.Argv); diff != "" {
		t.Errorf("argv after exec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(targetEnv, rep.Env); diff != "" {
		t.Errorf("environment after exec (-want +got):\n%s", diff)
	}
}

// TestExecControl makes the same mess and execs without Exec: the report
// must show every leak, or TestExecCleanSlate proves nothing.
func TestExecControl(t *testing.T) {
	rep := runHelper(t, "raw-exec")
	for _, fd := range []int{3, leakedFD} {
		if !slices.Contains(rep.Inherited, fd) {
			t.Errorf("descriptors that came through a bare execve: %v, want fd %d leaked (all open: %v %q)", rep.Inherited, fd, rep.FDs, rep.Targets)
		}
	}
	if rep.SigIgn&sigBit(unix.SIGHUP) == 0 {
		t.Errorf("SigIgn %016x after a bare execve, want SIGHUP still ignored", rep.SigIgn)
	}
	if rep.SigBlk&sigBit(unix.SIGUSR1) == 0 {
		t.Errorf("SigBlk %016x after a bare execve, want SIGUSR1 still blocked", rep.SigBlk)
	}
}

// TestEnviron: the environment init gets is the one the entrypoint was
// started with, byte for byte: a variable given twice (execve allows it)
// keeps both copies, and an entry without '=' or an empty one stays. Go's
// os.Environ keeps only the first copy of a variable and drops empty
// entries. exec.Cmd also drops duplicates, so the helper is started by
// ForkExec itself.
func TestEnviron(t *testing.T) {
	nstest.SkipEmulated(t, foreignExec)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{helperEnv + "=environ", "DUP=first", "PATH=/nonexistent", "DUP=second", "NOEQUALS", "", "LAST=1"}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pid, err := syscall.ForkExec(exe, []string{exe, "-test.run=^$"}, &syscall.ProcAttr{
		Env: env, Files: []uintptr{0, w.Fd(), os.Stderr.Fd()},
	})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	derr := json.NewDecoder(r).Decode(&got)
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("helper: %v, status %v", err, ws)
	}
	if derr != nil {
		t.Fatal(derr)
	}
	if diff := cmp.Diff(env, got); diff != "" {
		t.Errorf("Environ (-started with +got):\n%s", diff)
	}
}
