package system

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Linux is the real host, seen from the process's own root.
type Linux struct{}

var _ System = Linux{}

func (Linux) Stat(path string) (fs.FileInfo, error)      { return os.Stat(path) }
func (Linux) Lstat(path string) (fs.FileInfo, error)     { return os.Lstat(path) }
func (Linux) ReadDir(path string) ([]fs.DirEntry, error) { return os.ReadDir(path) }
func (Linux) Readlink(path string) (string, error)       { return os.Readlink(path) }

func (Linux) FSType(path string) (string, error) {
	var st unix.Statfs_t
	if err := retryEINTR(func() error { return unix.Statfs(path, &st) }); err != nil {
		return "", &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	return FSTypeName(st.Type), nil
}

func (Linux) NofileHard() (uint64, error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	return rl.Max, nil
}

func (l Linux) OverlayTrial() error {
	dir, err := os.MkdirTemp("", "entrypoint-overlay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, d := range []string{"l", "u", "w", "m"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	target := filepath.Join(dir, "m")
	data := fmt.Sprintf("lowerdir=%s/l,upperdir=%s/u,workdir=%s/w", dir, dir, dir)
	if err := l.Mount("overlay", target, "overlay", 0, data); err != nil {
		return err
	}
	return l.Unmount(target, 0)
}

func (Linux) LookupIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	ips, err := net.DefaultResolver.LookupNetIP(ctx, network, host)
	if err != nil {
		return nil, err
	}
	for i, ip := range ips {
		ips[i] = ip.Unmap()
	}
	return ips, nil
}

func (Linux) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, []byte, error) {
	if len(argv) == 0 {
		return nil, nil, errors.New("run: empty argv")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	stdout := boundedBuffer{limit: LimitOutput, cancel: cancel}
	stderr := boundedBuffer{limit: LimitValue}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A hung child that inherited our pipes must not keep us waiting past
	// the timeout.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if stdout.over {
		return nil, nil, fmt.Errorf("%s: standard output longer than the %d-byte limit", argv[0], LimitOutput)
	}
	if errors.Is(err, exec.ErrNotFound) {
		return nil, nil, &NotInstalledError{Name: argv[0]}
	}
	out, errOut := stdout.buf.Bytes(), stderr.buf.Bytes()
	if ctx.Err() == context.DeadlineExceeded {
		return out, errOut, &TimeoutError{What: argv[0], After: timeout}
	}
	if err != nil {
		// The error stands alone (a dry run's fact, check's row): it
		// quotes the first line of what the program said.
		err = fmt.Errorf("%s: %w", argv[0], err)
		if msg := bytes.TrimSpace(errOut); len(msg) > 0 {
			first, _, _ := bytes.Cut(msg, []byte("\n"))
			err = fmt.Errorf("%w: %s", err, first)
		}
	}
	return out, errOut, err
}

// boundedBuffer keeps what a command writes up to limit bytes. Past it,
// stdout's cancel kills the command (its output would be cut short, so
// it is refused); stderr's rest is dropped (only its first line is
// shown). Not an embedded bytes.Buffer: io.Copy would use its ReadFrom,
// which has no limit.
type boundedBuffer struct {
	buf    bytes.Buffer
	limit  int
	over   bool
	cancel context.CancelFunc
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.buf.Len(); len(p) > room {
		b.buf.Write(p[:max(room, 0)])
		if !b.over && b.cancel != nil {
			b.cancel()
		}
		b.over = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

// WriteFile writes data to a temporary file beside path, syncs it and
// renames it over path, so a crash leaves either the old or the new file.
func (Linux) WriteFile(path string, data []byte, perm fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(dir, "."+base+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	// The first error is returned; the file is closed whatever happened.
	if _, err = f.Write(data); err == nil {
		if err = f.Chmod(perm); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (Linux) WriteFileInPlace(path string, data []byte) error { return os.WriteFile(path, data, 0o644) }

func (Linux) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }
func (Linux) Remove(path string) error                     { return os.Remove(path) }
func (Linux) Symlink(target, path string) error            { return os.Symlink(target, path) }
func (Linux) Chown(path string, uid, gid int) error        { return os.Chown(path, uid, gid) }

// Chmod: os.Chmod maps fs.ModeSetuid/ModeSetgid to the kernel bits.
func (Linux) Chmod(path string, mode fs.FileMode) error { return os.Chmod(path, mode) }

func (Linux) Sync() { unix.Sync() }

func (Linux) Mount(source, target, fstype string, flags MountFlags, data string) error {
	err := retryEINTR(func() error { return unix.Mount(source, target, fstype, uintptr(flags), data) })
	if err != nil {
		return &MountError{Op: "mount", Source: source, Target: target, FSType: fstype, Flags: flags, Data: data, Err: err}
	}
	return nil
}

func (Linux) Unmount(target string, flags int) error {
	if err := retryEINTR(func() error { return unix.Unmount(target, flags) }); err != nil {
		return &MountError{Op: "umount", Target: target, Err: err}
	}
	return nil
}

// retryEINTR repeats a system call interrupted by a signal; Go's runtime
// sends SIGURG for preemption, so EINTR is not rare.
func retryEINTR(fn func() error) error {
	_, err := openRetry(func() (int, error) { return 0, fn() })
	return err
}
