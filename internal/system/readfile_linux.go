package system

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// readFile is os.ReadFile with fewer allocations: the path and the data,
// where os.ReadFile also allocates an *os.File and a FileInfo. A dry run
// reads some thirty files, so that was a sixth of its allocations. Errors
// are the same *fs.PathError values ("open", "read") with the errno.
func readFile(name string) ([]byte, error) {
	data, op, err := readFileErrno(name, nil)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return data, nil
}

// readFileErrno is readFile with the bare errno and the operation that
// failed: for a caller that only asks whether a file is there (a Tree's
// probe files are mostly absent), the *fs.PathError would be one more
// allocation thrown away. The data is read into buf when it has room.
func readFileErrno(name string, buf []byte) (data []byte, op string, err error) {
	var fd int
	for {
		fd, err = unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, "open", err
	}
	defer unix.Close(fd)

	// One byte more than a regular file's size, so that the read that
	// sees EOF needs no room of its own; /proc and /sys files say 0.
	size := 512
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size >= int64(size) {
		size = int(st.Size) + 1
	}
	if data = buf[:0]; cap(data) < size {
		data = make([]byte, 0, size)
	}
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := unix.Read(fd, data[len(data):cap(data)])
		if n > 0 {
			data = data[:len(data)+n]
		}
		switch {
		case err == unix.EINTR:
		case err != nil:
			return nil, "read", err
		case n == 0:
			return data, "", nil
		}
	}
}
