package system

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A Tree reads its files as the node would see them: every path, and every
// symlink met on the way, absolute or climbing with "..", resolves inside
// Root, never on the machine replaying it. openat2(2) with RESOLVE_IN_ROOT
// does that in the kernel: Root acts as "/" for the whole lookup.
// RESOLVE_NO_MAGICLINKS refuses /proc/PID/fd style links, which would
// lead anywhere.
const inRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS

// rootFD returns a descriptor of Root, opened once.
func (t *Tree) rootFD() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.root == nil {
		fd, err := openRetry(func() (int, error) {
			return unix.Open(t.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: t.Root, Err: err}
		}
		// An *os.File closes the descriptor when the Tree is collected.
		t.root = os.NewFile(uintptr(fd), t.Root)
	}
	return int(t.root.Fd()), nil
}

// relPath is node path p relative to the root, for openat2.
func relPath(p string) string {
	rel := strings.TrimPrefix(NodePath(p), "/")
	if rel == "" {
		return "."
	}
	return rel
}

// openIn opens node path p inside the root with flags; errors name p and
// op, the call a host would have failed in ("open", "stat", ...).
func (t *Tree) openIn(op, p string, flags int) (int, error) {
	root, err := t.rootFD()
	if err != nil {
		return -1, err
	}
	rel := relPath(p)
	fd, useWalk := -1, t.walk || noOpenat2.Load()
	if !useWalk {
		how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: inRoot}
		// EAGAIN: a rename raced the lookup; the kernel asks to retry.
		for range 16 {
			if fd, err = openRetry(func() (int, error) { return unix.Openat2(root, rel, &how) }); err != unix.EAGAIN {
				break
			}
		}
		if err == unix.ENOSYS {
			noOpenat2.Store(true)
			useWalk = true
		}
	}
	if useWalk {
		fd, err = walk(root, rel, flags|unix.O_CLOEXEC)
	}
	if err != nil {
		return -1, &fs.PathError{Op: op, Path: p, Err: err}
	}
	return fd, nil
}

// noOpenat2 is set once openat2(2) said ENOSYS: kernels before Linux 5.6,
// and qemu-user before 9.0, where the arm64 tests run (make test-arm64).
var noOpenat2 atomic.Bool

// walk is openIn without openat2: it resolves rel below root in user
// space, one component at a time, the way RESOLVE_IN_ROOT does in the
// kernel. Every component is opened O_PATH|O_NOFOLLOW relative to its
// directory; a symlink's target is read and resolved here, an absolute one
// from root, and ".." never climbs above root. So no lookup leaves the
// root, and a magic link (/proc/PID/fd/N) is never followed: its target is
// only a string resolved inside the root. The last component is opened
// with flags, O_NOFOLLOW added once its links are resolved. A rename that
// races the walk may give another file of the tree, never one outside it.
func walk(root int, rel string, flags int) (int, error) {
	follow := flags&unix.O_NOFOLLOW == 0
	todo := strings.Split(rel, "/")
	// dirs are the open directories from below root down to the current
	// one; the current one is root when it is empty.
	var dirs []int
	defer func() {
		for _, d := range dirs {
			unix.Close(d)
		}
	}()
	cur := func() int {
		if len(dirs) == 0 {
			return root
		}
		return dirs[len(dirs)-1]
	}
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if n := len(dirs); n > 0 {
				unix.Close(dirs[n-1])
				dirs = dirs[:n-1]
			}
			continue
		}
		last := !slices.ContainsFunc(todo, func(s string) bool { return s != "" && s != "." })
		fd, err := openRetry(func() (int, error) {
			return unix.Openat(cur(), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		})
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		typ := st.Mode & unix.S_IFMT
		if last && (typ != unix.S_IFLNK || !follow) {
			unix.Close(fd)
			return openRetry(func() (int, error) { return unix.Openat(cur(), name, flags|unix.O_NOFOLLOW, 0) })
		}
		switch typ {
		case unix.S_IFLNK:
			links++
			if links > MaxLinkHops {
				unix.Close(fd)
				return -1, unix.ELOOP
			}
			target, err := readlinkFD(fd)
			unix.Close(fd)
			if err != nil {
				return -1, err
			}
			if strings.HasPrefix(target, "/") {
				for _, d := range dirs {
					unix.Close(d)
				}
				dirs = dirs[:0]
			}
			todo = append(strings.Split(target, "/"), todo...)
		case unix.S_IFDIR:
			dirs = append(dirs, fd)
		default:
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
	}
	// The path ended at a directory: root itself, or after "..".
	return openRetry(func() (int, error) { return unix.Openat(cur(), ".", flags, 0) })
}

// readlinkFD reads the target of the symlink open (O_PATH) as fd.
func readlinkFD(fd int) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

// readIn reads node path p, a regular file of at most limit bytes;
// nofollow O_NOFOLLOW refuses a symlink at p.
func (t *Tree) readIn(p string, limit int, nofollow int) ([]byte, error) {
	fd, err := t.openRegularIn(p, nofollow)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readFD(fd, p, limit)
}

// openRegularIn opens the regular file at node path p inside the root for
// reading (openRegular).
func (t *Tree) openRegularIn(p string, nofollow int) (int, error) {
	return openRegular(p, func(flags int) (int, error) {
		fd, err := t.openIn("open", p, flags)
		if pe, ok := err.(*fs.PathError); ok {
			return -1, pe.Err
		}
		return fd, err
	}, nofollow)
}

// statIn is stat(2) (follow: the last component's link is followed) or
// lstat(2) of node path p inside the root.
func (t *Tree) statIn(p string, follow bool) (fs.FileInfo, error) {
	op, flags := "stat", unix.O_PATH
	if !follow {
		op, flags = "lstat", flags|unix.O_NOFOLLOW
	}
	fd, err := t.openIn(op, p, flags)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path.Base(NodePath(p)))
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: p, Err: errors.Unwrap(err)}
	}
	return fi, nil
}

func (t *Tree) Readlink(p string) (string, error) {
	fd, err := t.openIn("readlink", p, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	l, err := readlinkFD(fd)
	if err == unix.ENOENT {
		// An empty path names fd itself; ENOENT: it is no symlink.
		err = unix.EINVAL
	}
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: p, Err: err}
	}
	return l, nil
}

// ReadDir lists the directory at node path p inside the root, sorted by
// name as os.ReadDir. Each entry's Info is an Lstat inside the root too
// (os's would lstat the host's path).
func (t *Tree) ReadDir(p string) ([]fs.DirEntry, error) {
	fd, err := t.openIn("open", p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, &fs.PathError{Op: "readdirent", Path: p, Err: errors.Unwrap(err)}
	}
	out := make([]fs.DirEntry, len(entries))
	for i, e := range entries {
		out[i] = rootedEntry{e, t, path.Join(NodePath(p), e.Name())}
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

type rootedEntry struct {
	fs.DirEntry
	t *Tree
	p string
}

func (e rootedEntry) Info() (fs.FileInfo, error) { return e.t.statIn(e.p, false) }
