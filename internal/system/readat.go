package system

import (
	"io"
	"io/fs"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// File is a regular file open to read at offsets (Open): a reader of a
// few pages of a large file, such as etcd's database, pays for the pages
// it reads, not for the file's size.
type File interface {
	io.ReaderAt
	// Size is the file's size when it was opened.
	Size() int64
	Close() error
}

// openFile is an open regular file whose reads together may return at
// most limit bytes: the cap of ReadFile on a file's size becomes a cap on
// the bytes read, so a sparse 100 GB file costs what its touched pages
// cost, and a reader led around a corrupt file stops at the cap.
type openFile struct {
	fd    int
	name  string
	size  int64
	limit int64
	read  atomic.Int64 // bytes asked so far, by all ReadAt calls
}

// newFile is the open regular file fd, named name in errors, to read at
// offsets, at most limit bytes in all; it owns fd.
func newFile(fd int, name string, limit int) (File, error) {
	st, err := fstatRegular(fd, name) // as readFD checks again
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &openFile{fd: fd, name: name, size: st.Size, limit: int64(limit)}, nil
}

func (f *openFile) Size() int64 { return f.size }

func (f *openFile) Close() error {
	if err := unix.Close(f.fd); err != nil {
		return &fs.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

// ReadAt reads len(p) bytes at off, as io.ReaderAt: fewer only at the
// end of the file (io.EOF). A read that would take the bytes read past
// the limit reads nothing and is a *TooLargeError.
func (f *openFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: unix.EINVAL}
	}
	if f.read.Add(int64(len(p))) > f.limit {
		return 0, &TooLargeError{Path: f.name, Limit: int(f.limit), Read: true}
	}
	n := 0
	for n < len(p) {
		m, err := unix.Pread(f.fd, p[n:], off+int64(n))
		switch {
		case err == unix.EINTR:
		case err != nil:
			return n, &fs.PathError{Op: "read", Path: f.name, Err: err}
		case m == 0:
			return n, io.EOF
		default:
			n += m
		}
	}
	return n, nil
}

// Open opens the regular file name to read at offsets; the lookup is
// ReadFile's.
func (Linux) Open(name string, limit int) (File, error) {
	fd, err := openHost(name)
	if err != nil {
		return nil, err
	}
	return newFile(fd, name, limit)
}

// Open opens the regular file at node path p inside the root to read at
// offsets, following a file bind mount as ReadFile does; the lookup is
// ReadFile's (openRegularIn): links resolve inside the root, and what is
// not a regular file is refused before it is opened to read.
func (t *Tree) Open(p string, limit int) (File, error) {
	p = t.resolve(p)
	fd, err := t.openRegularIn(p, 0)
	if err != nil {
		return nil, err
	}
	return newFile(fd, p, limit)
}
