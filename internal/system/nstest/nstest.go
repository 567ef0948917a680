package nstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// init keeps the main goroutine on the startup thread from the start, for
// good: init functions run on it, and one that calls LockOSThread makes
// main run there too. So no test's goroutine can ever run, and unshare, on
// the main thread: /proc/self shows the main thread's namespaces, and a
// locked main thread is parked rather than ended when its goroutine exits,
// so it would stay in the test's namespaces for the rest of the run. A
// LockOSThread in Main came too late: the main goroutine could already have
// moved to another thread (Unshare then failed, "the test runs on the main
// thread"): once in six runs of a package under qemu-user, where threads
// are rescheduled more often.
func init() { runtime.LockOSThread() }

// Main is TestMain for a package with privileged tests; it does not return.
// It runs the tests and exits with m.Run's code, or 1 when the mount table
// of the process's original namespace, or of PID 1's, differs in any way
// afterwards. That is what guarantees the machine's own /sys and mounts
// were not touched, whatever a test did in its namespaces.
func Main(m *testing.M) {
	before := snapshot()
	os.Exit(mountsUnchanged(before, m.Run(), "these tests"))
}

// mountTables are the files Main compares before and after the tests.
var mountTables = []string{"/proc/self/mountinfo", "/proc/1/mountinfo"}

// othersMounts are where container engines mount and unmount on their own
// (a container of the e2e tier starting or stopping meanwhile); the tests
// here never mount there, so those lines are left out of the comparison,
// as are those below any directory named containerd (a containerd of its
// own state directory, as a nerdctl run starts).
// The Docker 29 tier's engine (test/docker29) keeps its state and mounts
// under kind-entrypoint-docker29, and `ip netns add` bind-mounts /run/netns
// onto itself the first time: a match is the directory itself or below it.
var othersMounts = []string{"/var/lib/docker/", "/run/docker/", "/var/lib/containerd/", "/run/containerd/", "/run/netns/",
	"/var/lib/containers/", "/run/containers/", // podman's storage and state
	"/var/lib/kind-entrypoint-docker29/", "/run/kind-entrypoint-docker29/"}

func othersMount(target string) bool {
	return slices.ContainsFunc(othersMounts, func(dir string) bool {
		return strings.HasPrefix(target+"/", dir)
	}) || strings.Contains(target, "/containerd/")
}

func snapshot() map[string]string {
	s := map[string]string{}
	for _, p := range mountTables {
		b, err := os.ReadFile(p)
		if err != nil {
			// Unreadable (not root): compare the error, which stays
			// the same; the privileged tests fail on their own.
			s[p] = "error: " + err.Error()
			continue
		}
		lines := slices.DeleteFunc(strings.Split(string(b), "\n"), func(line string) bool {
			f := strings.Fields(line)
			return len(f) > 4 && othersMount(f[4])
		})
		s[p] = strings.Join(lines, "\n")
	}
	return s
}

// mountsUnchanged returns code, at least 1 when the mount tables differ
// from before: it prints how, naming the tests that ran.
func mountsUnchanged(before map[string]string, code int, tests string) int {
	after := snapshot()
	var b strings.Builder
	for _, p := range mountTables {
		if before[p] != after[p] {
			fmt.Fprintf(&b, "%s:\n%s", p, DiffLines(before[p], after[p]))
		}
	}
	if b.Len() == 0 {
		return code
	}
	fmt.Fprintf(os.Stderr, "FAIL: the machine's mount table changed while %s ran (- before, + after):\n%s", tests, b.String())
	return max(code, 1)
}

// DiffLines lists the lines only in a ("- ") and only in b ("+ "), in order;
// "" when a and b are equal. Mount tables are short: quadratic is fine.
func DiffLines(a, b string) string {
	if a == b {
		return ""
	}
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	// only prints, marked, the lines of these that others lacks.
	only := func(mark string, these, others []string) {
		n := map[string]int{}
		for _, l := range others {
			n[l]++
		}
		for _, l := range these {
			if n[l] > 0 {
				n[l]--
				continue
			}
			fmt.Fprintf(&out, "%s %s\n", mark, l)
		}
	}
	only("-", al, bl)
	only("+", bl, al)
	if out.Len() == 0 {
		// Same lines, another order.
		fmt.Fprintf(&out, "(same lines, reordered)\n- %q\n+ %q\n", a, b)
	}
	return out.String()
}

// RequireRoot fails the test unless it runs as root. Privileged tests are
// never skipped for want of privilege: CI runs go test as root, and a silent
// skip would hide that this tier did not run.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("privileged test: needs root (euid %d); run go test as root, as CI does (this tier fails rather than skips)", os.Geteuid())
	}
}

// Emulator is the user-mode emulator the tests run under, or "" on a
// native run: make test-arm64 sets ENTRYPOINT_TEST_EMULATOR to
// qemu-aarch64-static.
func Emulator() string { return os.Getenv("ENTRYPOINT_TEST_EMULATOR") }

// Command is exec.CommandContext(ctx, bin, args...) for a binary built for
// the architecture under test. Under an emulator it runs through it: the
// kernel cannot start a foreign binary itself (ENOEXEC), since that needs
// binfmt_misc, which belongs to the host's kernel and no test registers.
func Command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	if emu := Emulator(); emu != "" {
		return exec.CommandContext(ctx, emu, append([]string{bin}, args...)...)
	}
	return exec.CommandContext(ctx, bin, args...)
}

// Stretch is a test's time limit for work that takes a moment natively
// (a fake command's answer): d, or 8 times d under an emulator, where a
// loaded machine ran a fake iptables-save past 150 ms and the scenario was
// planned as if the save had hung.
func Stretch(d time.Duration) time.Duration {
	if Emulator() != "" {
		return 8 * d
	}
	return d
}

// SkipEmulated skips t when it runs under an emulator, naming the emulator
// and why. Only for what user-mode emulation cannot do: start a child in
// namespaces of its own, exec a foreign binary from inside the test, or
// netlink messages it does not translate.
func SkipEmulated(t testing.TB, why string) {
	t.Helper()
	if emu := Emulator(); emu != "" {
		t.Skipf("under %s: %s", emu, why)
	}
}

// Unshare moves the calling test goroutine into new namespaces (CLONE_NEWNS,
// CLONE_NEWNET, ...) for the rest of the test, Cleanup functions included.
// With CLONE_NEWNS, "/" is first made recursively private, so nothing the
// test mounts propagates out. Call it from the test's own goroutine, before
// anything else; do not call t.Run or t.Parallel afterwards (a subtest runs
// on another goroutine, outside the namespaces).
func Unshare(t testing.TB, flags int) {
	t.Helper()
	RequireRoot(t)
	// Never unlocked: the thread ends with the test goroutine.
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		t.Fatal("nstest: the test runs on the main thread; its TestMain must call nstest.Main (which keeps the main thread)")
	}
	hostMnt := nsLink(t, "/proc/self/ns/mnt")
	if err := unix.Unshare(flags); err != nil {
		if errors.Is(err, unix.EINVAL) {
			t.Skipf("kernel lacks a namespace type asked for (unshare %#x: %v)", flags, err)
		}
		t.Fatalf("unshare %#x: %v", flags, err)
	}
	if flags&unix.CLONE_NEWNS == 0 {
		return
	}
	if _, err := leftMountNS(hostMnt); err != nil {
		t.Fatal(err)
	}
}

func nsLink(t testing.TB, p string) string {
	t.Helper()
	s, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ThreadMountinfo parses the mount table of the calling thread's mount
// namespace. Call it from a goroutine that Unshare locked.
func ThreadMountinfo(t testing.TB) []*mountinfo.Info {
	t.Helper()
	mi, err := threadMounts()
	if err != nil {
		t.Fatal(err)
	}
	return mi
}

func threadMounts() ([]*mountinfo.Info, error) {
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	mi, err := mountinfo.GetMountsFromReader(bytes.NewReader(b), nil)
	if err != nil {
		return nil, fmt.Errorf("/proc/thread-self/mountinfo: %w", err)
	}
	return mi, nil
}

// OnHost runs fn on another OS thread and waits for it. Called from a test
// that Unshare moved, fn sees the machine's own namespaces: every thread
// but a locked one is in them, and a locked thread runs only its goroutine.
func OnHost(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}
