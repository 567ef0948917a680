package system

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Environ is the environment this process was started with, as execve
// gave it (/proc/self/environ): what init gets, unchanged. os.Environ is
// not that: Go keeps only the first copy of a variable given twice, and
// drops empty entries. Without a readable /proc it is os.Environ.
func Environ() []string {
	b, err := Linux{}.ReadFile("/proc/self/environ", LimitOutput)
	if err != nil {
		return os.Environ()
	}
	if len(b) == 0 {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// Exec replaces this process with init, so that init is PID 1. It leaves
// init a clean slate: every inherited descriptor above stderr is closed on
// exec, no signal is blocked, and no signal stays ignored (execve(2) keeps
// SIG_IGN dispositions and the signal mask).
func Exec(argv []string, env []string) error {
	if len(argv) == 0 {
		return errors.New("exec: no command")
	}
	bin := argv[0]
	if !strings.Contains(bin, "/") {
		p, err := exec.LookPath(bin)
		if err != nil {
			return err
		}
		bin = p
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := closeExecFrom(3); err != nil {
		return err
	}
	resetIgnoredSignals()
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &unix.Sigset_t{}, nil); err != nil {
		return fmt.Errorf("unblock signals: %w", err)
	}
	err := retryEINTR(func() error { return unix.Exec(bin, argv, env) })
	return &os.PathError{Op: "exec", Path: bin, Err: err}
}

// closeExecFrom marks every open descriptor >= min close-on-exec. Go opens
// its own files with O_CLOEXEC; this catches what the container runtime
// handed us.
func closeExecFrom(min int) error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list open descriptors: %w", err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < min {
			continue
		}
		// The descriptor of the directory listing itself is gone by now:
		// EBADF is fine.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("close-on-exec fd %d: %w", fd, err)
		}
	}
	return nil
}

// kernelSigaction is struct sigaction as rt_sigaction(2) takes it on the
// architectures we build for (amd64, arm64).
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const sigIgn = 1

// resetIgnoredSignals sets every ignored signal back to its default. Only
// ignored ones: handled signals are reset by execve itself, and touching
// the Go runtime's handlers before exec would be unsafe.
func resetIgnoredSignals() {
	for sig := 1; sig < 65; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		var old kernelSigaction
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 || old.handler != sigIgn {
			continue
		}
		act := kernelSigaction{}
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	}
}
