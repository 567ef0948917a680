package nstest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// sandboxEnv marks the test binary run inside the sandbox; its value is
// the mount namespace of the process that started it, which the sandbox
// must not be.
const sandboxEnv = "NSTEST_SANDBOX_OF"

// HostNS is, inside the sandbox, the mount namespace of the process that
// made it (/proc/self/ns/mnt's link there), kept in hostNSEnv.
func HostNS() string { return os.Getenv(hostNSEnv) }

const hostNSEnv = "NSTEST_SANDBOX_HOST_NS"

// SandboxDirEnv names, inside the sandbox, the run's writable directory
// (TMPDIR); prepare may leave files there for the tests (a built binary).
const SandboxDirEnv = "NSTEST_SANDBOX_DIR"

// Sandbox is TestMain for a package whose tests apply plans to fake trees
// or run the built binary on one: whatever a bug makes them write, it
// cannot land on the machine. The test binary runs itself again in a new
// mount namespace, where it makes "/" recursively private, then every
// mount read-only with mount_setattr(2) (a per-mount flag: no superblock,
// and so no other namespace, is changed), then mounts a tmpfs of its own
// on TMPDIR (so every t.TempDir) and binds the go command's output files
// writable again. Afterwards the machine's mount tables must be as before
// (Main).
//
// prepare, when set, runs first, outside, with the run's directory: for
// what needs the machine (building the binary with the go command's
// cache). Without root, or where the kernel refuses the namespace, the
// package's tests are skipped with a message.
//
// Under a user-mode emulator (make test-arm64) the sandbox is the same,
// made another way (emulated.go): a thread unshares the namespace and
// starts the emulator on the test binary from there, and each mount is
// remounted read-only where mount_setattr is missing. Either way every
// mount a path leads to must be read-only before the tests start.
func Sandbox(m *testing.M, prepare func(dir string) error) {
	if InSandbox() {
		Main(m) // a process the sandboxed tests started (a fuzzing worker)
	}
	if of := os.Getenv(sandboxEnv); of != "" {
		if err := enterSandbox(of); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: nstest: sandbox: %v\n", err)
			os.Exit(1)
		}
		Main(m)
	}
	os.Exit(runSandboxed(prepare))
}

// runSandboxed starts the test binary again in the sandbox and returns
// its exit code.
func runSandboxed(prepare func(dir string) error) int {
	skip := func(why string) int {
		fmt.Printf("SKIP: these tests apply plans to fake trees and run only in a private mount namespace with / read-only: %s\n", why)
		return 0
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "FAIL: nstest: "+format+"\n", args...)
		return 1
	}
	if os.Geteuid() != 0 {
		return skip(fmt.Sprintf("that needs root (euid %d); run go test as root, as CI does", os.Geteuid()))
	}
	hostNS, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return skip(err.Error())
	}
	dir, err := os.MkdirTemp("", "nstest-sandbox-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(dir)
	if prepare != nil {
		if err := prepare(dir); err != nil {
			return fail("preparing the sandbox: %v", err)
		}
	}
	before := snapshot()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fail("%v", err)
	}
	env := append(os.Environ(), sandboxEnv+"="+hostNS, SandboxDirEnv+"="+dir, "TMPDIR="+tmp)
	startErr, waitErr := runInMountNS(func() (*exec.Cmd, error) { return selfCommand(env) }, hostNS)
	if err := startErr; err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			return skip(fmt.Sprintf("the kernel refuses a new mount namespace: %v", err))
		}
		return fail("starting the sandbox: %v", err)
	}
	code := 0
	if err := waitErr; err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return fail("%v", err)
		}
		if code = exit.ExitCode(); code <= 0 {
			code = fail("the sandboxed tests ended: %v", err)
		}
	}
	return mountsUnchanged(before, code, "the sandboxed tests")
}

// enterSandbox makes the mount namespace the process runs in (a new one,
// not hostNS) read-only but for the run's writable directories.
func enterSandbox(hostNS string) error {
	// Private first: no mount made here propagates to a peer outside.
	ns, err := leftMountNS(hostNS)
	if err != nil {
		return err
	}
	dirs := writableDirs()
	// Every mount read-only: a flag of each mount of this namespace, set
	// without resolving a path through an automount point.
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := mountSetattr("/", unix.AT_RECURSIVE|unix.AT_NO_AUTOMOUNT, ro); err != nil {
		return fmt.Errorf("make every mount read-only (mount_setattr): %w", err)
	}
	if err := checkAllReadOnly(); err != nil {
		return err
	}
	// The temporary files in memory: the tests that copy trees hundreds
	// of times are slow on a disk, and nothing of them outlives the run.
	tmp := os.Getenv("TMPDIR")
	if err := unix.Mount("tmpfs", tmp, "tmpfs", unix.MS_NOSUID, "mode=0700"); err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %w", tmp, err)
	}
	rw := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	for _, d := range dirs {
		if err := unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", d, err)
		}
		if err := mountSetattr(d, unix.AT_RECURSIVE|unix.AT_NO_AUTOMOUNT, rw); err != nil {
			return fmt.Errorf("make %s writable: %w", d, err)
		}
	}
	if err := CheckReadOnly("/"); err != nil {
		return err
	}
	// Marked done: a process these tests start (a fuzzing worker) finds
	// its sandbox made.
	return errors.Join(os.Setenv(sandboxEnv, ns+" (sandboxed)"), os.Setenv(hostNSEnv, hostNS))
}

// CheckReadOnly returns an error unless making a directory in dir fails
// with EROFS (and so changes nothing); a directory made is removed.
func CheckReadOnly(dir string) error {
	probe := filepath.Join(dir, fmt.Sprintf(".nstest-probe-%d", os.Getpid()))
	err := unix.Mkdir(probe, 0o700)
	if err == nil {
		unix.Rmdir(probe)
		return fmt.Errorf("%s is writable in the sandbox", dir)
	}
	if !errors.Is(err, unix.EROFS) {
		return fmt.Errorf("mkdir %s: %v, want EROFS", probe, err)
	}
	return nil
}

// writableDirs are the directories the tests may write besides TMPDIR:
// those of the files the go command asks for (-test.testlogfile,
// -test.coverprofile, ...), and the package's directory when the run
// writes there (fuzzing corpus, golden files with -update).
func writableDirs() []string {
	dirs := []string{os.Getenv("GOCOVERDIR")} // "" when unset: left out below
	cwd, _ := os.Getwd()
	outdir := cwd
	files := map[string]bool{"testlogfile": true, "coverprofile": true, "cpuprofile": true, "memprofile": true,
		"blockprofile": true, "mutexprofile": true, "trace": true}
	dirFlags := map[string]bool{"outputdir": true, "gocoverdir": true, "fuzzcachedir": true}
	args := os.Args[1:]
	var paths []string
	for i := 0; i < len(args); i++ {
		name, value, ok := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		name = strings.TrimPrefix(name, "test.")
		if !ok && (files[name] || dirFlags[name] || name == "fuzz") && i+1 < len(args) {
			i++
			value = args[i]
		}
		switch {
		case name == "outputdir":
			outdir = value
			dirs = append(dirs, value)
		case dirFlags[name]:
			dirs = append(dirs, value)
		case files[name]:
			paths = append(paths, value)
		case name == "fuzz" && value != "":
			dirs = append(dirs, cwd)
		case name == "update":
			dirs = append(dirs, cwd)
			if root := moduleRoot(cwd); root != "" {
				dirs = append(dirs, filepath.Join(root, "testdata")) // the fake hosts' goldens
			}
		}
	}
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(outdir, p)
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	var out []string
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil && filepath.Base(d) == "testdata" {
			continue // no shared goldens to update
		}
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			continue // the tests will say what they could not write
		}
		out = append(out, d)
	}
	return out
}

// InSandbox reports whether the tests run in Sandbox's namespace.
func InSandbox() bool { return strings.HasSuffix(os.Getenv(sandboxEnv), " (sandboxed)") }

// Writable makes the mount at mountpoint p writable again in the test's
// own mount namespace, for a test whose purpose is a change the kernel
// makes outside any directory (a cgroup it creates and removes). Call it
// after Unshare(CLONE_NEWNS): the flag is of the test's copy of the
// mount, never of the sandbox's or the machine's.
func Writable(t testing.TB, p string) {
	t.Helper()
	if nsLink(t, "/proc/thread-self/ns/mnt") == nsLink(t, "/proc/self/ns/mnt") {
		t.Fatal("nstest.Writable: call Unshare(CLONE_NEWNS) first: the mount would change for every test")
	}
	rw := &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	if err := mountSetattr(p, unix.AT_NO_AUTOMOUNT|unix.AT_SYMLINK_NOFOLLOW, rw); err != nil {
		t.Fatalf("make %s writable in the test's mount namespace: %v", p, err)
	}
}

// moduleRoot is the nearest directory at or above dir that holds go.mod,
// or "".
func moduleRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}
