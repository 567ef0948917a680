package system

import (
	"fmt"
	"io/fs"
	"strconv"

	"golang.org/x/sys/unix"
)

// Read limits: every ReadFile names the most its file may hold, so that a
// file linked to /dev/zero, or one grown without bound, is an error naming
// it, never the whole machine's memory.
const (
	// LimitValue fits a file of one short value: an id, an address, a
	// name, a kernel version, a controller list.
	LimitValue = 4 << 10
	// LimitConfig fits a configuration file or a small kernel table
	// (uid_map, /proc/self/cgroup, /proc/cgroups, resolv.conf, a unit).
	LimitConfig = 1 << 20
	// LimitTable fits a kernel table that grows with the host: the
	// mount table of a busy node (tens of thousands of mounts), its
	// routes.
	LimitTable = 16 << 20
	// LimitOutput fits the standard output of a command the entrypoint
	// runs (iptables-save of a node with tens of thousands of services).
	LimitOutput = 64 << 20
)

// TooLargeError is the error of a read that found more than its limit.
type TooLargeError struct {
	Path  string
	Limit int
	// Read: the limit is on the bytes read at offsets (Open), not on
	// the file's size.
	Read bool
}

func (e *TooLargeError) Error() string {
	if e.Read {
		return fmt.Sprintf("%s: reading more than the %d-byte limit on what is read of this file", e.Path, e.Limit)
	}
	return fmt.Sprintf("%s: more than the %d-byte limit for this file", e.Path, e.Limit)
}

// NotRegularError is the error of a read of something that is not a
// regular file (a pipe, a device, a directory, a socket): where a file is
// expected, reading one could block forever or never end.
type NotRegularError struct {
	Path string
	Type string
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: not a regular file (%s)", e.Path, e.Type)
}

// openFlags open a file to read, once it is known to be a regular file:
// O_NONBLOCK so that a named pipe swapped in meanwhile returns at once
// (its type is then refused), O_NOCTTY so that a terminal never becomes
// ours.
const openFlags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY

// ReadOptional reads a file that may be absent: nil and no error when it
// is not there (NotExist), and otherwise its content, never nil, so that
// an empty file and a missing one stay apart.
func ReadOptional(sys System, path string, limit int) ([]byte, error) {
	b, err := sys.ReadFile(path, limit)
	if NotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// ReadFile reads the regular file name, at most limit bytes. Errors are
// *fs.PathError values ("open", "read") with the errno, a
// *NotRegularError or a *TooLargeError.
func (Linux) ReadFile(name string, limit int) ([]byte, error) {
	fd, err := openHost(name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readFD(fd, name, limit)
}

// openHost opens the regular file name of the machine to read
// (openRegular), symlinks followed.
func openHost(name string) (int, error) {
	return openRegular(name, func(flags int) (int, error) {
		return openRetry(func() (int, error) { return unix.Open(name, flags, 0) })
	}, 0)
}

// openRegular opens a file to read only once it is known to be a regular
// file: open (a lookup that opens with the flags it is given) first with
// O_PATH, which reaches no driver and no FIFO, then fstat, then the open
// to read, of the very inode checked: through /proc/self/fd, or where
// there is no /proc by a second lookup that must find the same inode.
// nofollow is 0 or O_NOFOLLOW (then a symlink is refused as not regular).
func openRegular(name string, open func(flags int) (int, error), nofollow int) (int, error) {
	pfd, err := open(unix.O_PATH | unix.O_CLOEXEC | nofollow)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(pfd)
	st, err := fstatRegular(pfd, name)
	if err != nil {
		return -1, err
	}
	var buf [32]byte
	proc := strconv.AppendInt(append(buf[:0], "/proc/self/fd/"...), int64(pfd), 10)
	fd, err := openRetry(func() (int, error) { return unix.Open(string(proc), openFlags, 0) })
	if err == unix.ENOENT {
		// No /proc: look the name up again; it must be the same file.
		fd, err = open(openFlags | nofollow)
		if err == nil {
			var again unix.Stat_t
			if err := unix.Fstat(fd, &again); err != nil || again.Dev != st.Dev || again.Ino != st.Ino {
				unix.Close(fd)
				return -1, &fs.PathError{Op: "open", Path: name, Err: unix.EAGAIN}
			}
		}
	}
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return fd, nil
}

// openRetry is retryEINTR of a call that returns a descriptor.
func openRetry(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// fstatRegular is fstat(2) of fd, named name in errors, which must be a
// regular file.
func fstatRegular(fd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return st, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return st, &NotRegularError{Path: name, Type: fileType(st.Mode)}
	}
	return st, nil
}

// readFD reads the open file fd, named name in errors: it must be a regular
// file of at most limit bytes. It allocates the data only (os.ReadFile
// also allocates an *os.File and a FileInfo; a dry run reads some thirty
// files).
func readFD(fd int, name string, limit int) ([]byte, error) {
	st, err := fstatRegular(fd, name)
	if err != nil {
		return nil, err
	}
	if st.Size > int64(limit) {
		return nil, &TooLargeError{Path: name, Limit: limit}
	}
	// One byte more than a regular file's size, so that the read that
	// sees EOF needs no room of its own; /proc and /sys files say 0.
	data := make([]byte, 0, min(max(512, int(st.Size)+1), limit+1))
	for {
		if len(data) > limit {
			return nil, &TooLargeError{Path: name, Limit: limit}
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		room := data[len(data):min(cap(data), limit+1)]
		n, err := unix.Read(fd, room)
		if n > 0 {
			data = data[:len(data)+n]
		}
		switch {
		case err == unix.EINTR:
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		case n == 0:
			return data, nil
		}
	}
}

// fileTypes name the file types a read refuses, for its error.
var fileTypes = map[uint32]string{
	unix.S_IFDIR:  "a directory",
	unix.S_IFIFO:  "a named pipe",
	unix.S_IFCHR:  "a character device",
	unix.S_IFBLK:  "a block device",
	unix.S_IFSOCK: "a socket",
	unix.S_IFLNK:  "a symbolic link",
}

func fileType(mode uint32) string {
	if name, ok := fileTypes[mode&unix.S_IFMT]; ok {
		return name
	}
	return fmt.Sprintf("file type %#o", mode&unix.S_IFMT)
}
