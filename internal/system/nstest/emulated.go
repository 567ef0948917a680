package nstest

// What the sandbox does differently under a user-mode emulator
// (qemu-aarch64-static for make test-arm64). qemu-user 7.2 refuses namespace
// flags in clone(2) (EINVAL), cannot exec /proc/self/exe (it execs the test
// binary itself, which the kernel refuses without binfmt_misc: ENOEXEC),
// and lacks mount_setattr(2) (ENOSYS); it passes unshare(2) and mount(2)
// through. The sandbox it gives is the same one, checked the same way.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// selfCommand runs this test binary again, with env and this process's
// standard files: /proc/self/exe natively, and under an emulator the
// emulator again on the binary's path (which the emulator answers for
// os.Executable).
func selfCommand(env []string) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	if Emulator() == "" {
		cmd = exec.Command("/proc/self/exe", os.Args[1:]...)
		cmd.Args[0] = os.Args[0]
	} else {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd = Command(context.Background(), self, os.Args[1:]...)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	return cmd, nil
}

// runInMountNS runs the command newCmd makes in a new mount namespace
// whose "/" is recursively private, killed if its parent dies, and returns
// the error of its start or of its wait. Natively the kernel makes the
// namespace as it clones the child (CLONE_NEWNS); under an emulator see
// onUnsharedThread, whose thread waits for the command (Pdeathsig is the
// death of that thread), and startTimely: a child that hung before it ran
// is started again, twice at most.
func runInMountNS(newCmd func() (*exec.Cmd, error), hostNS string) (startErr, waitErr error) {
	for attempt := 1; ; attempt++ {
		cmd, err := newCmd()
		if err != nil {
			return err, nil
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if Emulator() == "" {
			cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS
			if err := cmd.Start(); err != nil {
				return err, nil
			}
			return nil, cmd.Wait()
		}
		var hung bool
		startErr = onUnsharedThread(unix.CLONE_NEWNS, hostNS, func() error {
			if hung, err = startTimely(cmd); err != nil {
				return err
			}
			waitErr = cmd.Wait()
			return nil
		})
		if !hung || startErr != nil || attempt == 3 {
			return startErr, waitErr
		}
		fmt.Fprintf(os.Stderr, "nstest: under %s the sandbox's process hung before it ran (%v): starting it again\n", Emulator(), errHung)
	}
}

// startLimit is how long a command forked under an emulator may take to
// exec; natively it takes milliseconds.
const startLimit = 60 * time.Second

// errHung says why startTimely killed a child.
var errHung = fmt.Errorf("qemu-user 7.2 at times deadlocks in the child it forks, on a lock of its own, before the exec; killed after %v", startLimit)

// startTimely is cmd.Start, called on the thread that forks (locked),
// under an emulator, with a watchdog: when the child has not exec'd after
// startLimit, every child of this thread is killed (then cmd.Start
// returns, and cmd.Wait reports the kill), and hung is true.
func startTimely(cmd *exec.Cmd) (hung bool, err error) {
	children := fmt.Sprintf("/proc/%d/task/%d/children", os.Getpid(), unix.Gettid())
	var fired atomic.Bool
	stop := make(chan struct{})
	go func() {
		select {
		case <-stop:
		case <-time.After(startLimit):
			fired.Store(true)
			b, _ := os.ReadFile(children)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					unix.Kill(pid, unix.SIGKILL)
				}
			}
		}
	}()
	err = cmd.Start()
	close(stop)
	return fired.Load(), err
}

// StartIn starts cmd in new namespaces (flags: CLONE_NEWNS, CLONE_NEWNET,
// ...), as SysProcAttr.Cloneflags does; with CLONE_NEWNS, "/" is made
// recursively private there first under an emulator (see
// onUnsharedThread). cmd must not set Pdeathsig, which under an emulator
// would be the death of a thread that ends once cmd has started.
func StartIn(cmd *exec.Cmd, flags uintptr) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if Emulator() == "" {
		cmd.SysProcAttr.Cloneflags |= flags
		return cmd.Start()
	}
	if cmd.SysProcAttr.Pdeathsig != 0 {
		return errors.New("nstest.StartIn: Pdeathsig would kill the command as soon as it started")
	}
	hostNS, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	return onUnsharedThread(int(flags), hostNS, func() error {
		hung, err := startTimely(cmd)
		if err == nil && hung {
			cmd.Wait()
			err = errHung
		}
		return err
	})
}

// onUnsharedThread runs fn on a thread of its own that unshare(2) moved
// into new namespaces (flags), for an emulator that refuses namespace
// flags in clone(2) (qemu-user: EINVAL) but passes unshare(2) through: a
// child is forked in the namespaces of the thread that forks it. With
// CLONE_NEWNS the thread must have left the mount namespace hostNS, and
// "/" is made recursively private there. The thread is locked to its
// goroutine and ends with it, never having run anything but fn.
func onUnsharedThread(flags int, hostNS string, fn func() error) error {
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked
		if err = unix.Unshare(flags); err != nil {
			return
		}
		if flags&unix.CLONE_NEWNS != 0 {
			if _, err = leftMountNS(hostNS); err != nil {
				return
			}
		}
		err = fn()
	}()
	<-done
	return err
}

// leftMountNS, called just after the calling thread moved into a new mount
// namespace (unshare, or a process started in one), returns that
// namespace after checking that it is not hostNS, and makes "/"
// recursively private there: nothing mounted in it propagates out.
func leftMountNS(hostNS string) (string, error) {
	ns, err := os.Readlink("/proc/thread-self/ns/mnt")
	if err != nil {
		return "", err
	}
	if ns == hostNS {
		return "", fmt.Errorf("still in the original mount namespace %s: refusing to change its mounts", ns)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("make / rprivate in the new mount namespace: %w", err)
	}
	return ns, nil
}

// mountSetattr is mount_setattr(2) on path, which the sandbox uses for the
// read-only flag only. Under an emulator that lacks it (ENOSYS), every
// mount it would change is bind-remounted instead (remountEach); natively
// ENOSYS stays an error.
func mountSetattr(path string, flags uint, attr *unix.MountAttr) error {
	err := unix.MountSetattr(unix.AT_FDCWD, path, flags, attr)
	if !errors.Is(err, unix.ENOSYS) || Emulator() == "" {
		return err
	}
	if attr.Attr_set|attr.Attr_clr != unix.MOUNT_ATTR_RDONLY || attr.Propagation != 0 {
		return fmt.Errorf("%w under %s, which only the read-only flag works around", err, Emulator())
	}
	return remountEach(path, flags&unix.AT_RECURSIVE != 0, attr.Attr_set != 0)
}

// remountEach sets (ro) or clears the read-only flag of the mount at path
// and, recursive, of every mount below it: one bind remount each, with the
// mount's other per-mount flags given again (the kernel clears those it is
// not given). A mount covered by another one is left alone: no path leads
// to it, for mount(2) as for the tests (see reachableMounts).
func remountEach(path string, recursive, ro bool) error {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p // mountinfo names mountpoints without symbolic links
	}
	mi, err := threadMounts()
	if err != nil {
		return err
	}
	n := 0
	for _, m := range reachableMounts(mi) {
		if m.Mountpoint != path && (!recursive || !strings.HasPrefix(m.Mountpoint, strings.TrimSuffix(path, "/")+"/")) {
			continue
		}
		f := system.Remount | system.Bind | system.FlagsFromOptions(m.Options)&^system.ReadOnly
		if ro {
			f |= system.ReadOnly
		}
		if err := unix.Mount("", m.Mountpoint, "", uintptr(f), ""); err != nil {
			return fmt.Errorf("mount %s with %s: %w", m.Mountpoint, f, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no mount at %s in %s", path, "/proc/thread-self/mountinfo")
	}
	return nil
}

// reachableMounts are the mounts of mi that a path can lead to: those not
// covered by a mount on the same mountpoint (a mount whose parent it is),
// below no covered mount but for the one covering it.
func reachableMounts(mi []*mountinfo.Info) []*mountinfo.Info {
	byID := make(map[int]*mountinfo.Info, len(mi))
	for _, m := range mi {
		byID[m.ID] = m
	}
	covered := map[int]bool{}
	for _, m := range mi {
		if p := byID[m.Parent]; p != nil && p != m && p.Mountpoint == m.Mountpoint {
			covered[p.ID] = true
		}
	}
	// open[id]: a path leads to the mount's root, covered or not; it is
	// reachable when it is not covered. Memoized: each mount is looked at
	// once, whatever the depth.
	open := make(map[int]bool, len(mi))
	var isOpen func(m *mountinfo.Info) bool
	isOpen = func(m *mountinfo.Info) bool {
		if o, ok := open[m.ID]; ok {
			return o
		}
		open[m.ID] = false // a cycle (none in a mount table) leads nowhere
		o := true
		if p := byID[m.Parent]; p != nil && p != m {
			// On its parent's mountpoint, m is what covers the parent.
			o = isOpen(p) && (p.Mountpoint == m.Mountpoint || !covered[p.ID])
		}
		open[m.ID] = o
		return o
	}
	var out []*mountinfo.Info
	for _, m := range mi {
		if isOpen(m) && !covered[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

// checkAllReadOnly returns an error unless every mount of the calling
// thread's namespace that a path leads to is read-only.
func checkAllReadOnly() error {
	mi, err := threadMounts()
	if err != nil {
		return err
	}
	var rw []string
	for _, m := range reachableMounts(mi) {
		if !slices.Contains(strings.Split(m.Options, ","), "ro") {
			rw = append(rw, m.Mountpoint)
		}
	}
	if len(rw) > 0 {
		return fmt.Errorf("mounts still writable in the sandbox: %s", strings.Join(rw, " "))
	}
	return nil
}
