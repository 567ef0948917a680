package system

import (
	"context"
	"io/fs"
	"net/netip"
	"time"
)

// Probe is what one probe of the host found: its value, or why the probe
// failed (Err, which names what was run or read). A step's facts hold one
// per probe that may fail, so that a failure travels with what it is a
// failure of.
type Probe[T any] struct {
	Value T
	Err   error
}

// System is what a step may read, probe and change.
type System interface {
	// Files.

	// ReadFile reads the regular file at path, which may hold at most
	// limit bytes (see LimitValue...): anything else (a pipe, a device,
	// a larger file) is an error naming path and limit.
	ReadFile(path string, limit int) ([]byte, error)
	// Open opens the regular file at path to read at offsets, the way
	// ReadFile finds and checks it; its reads together may return at
	// most limit bytes (past it, ReadAt is a *TooLargeError), whatever
	// the file's size. The caller closes it.
	Open(path string, limit int) (File, error)
	Stat(path string) (fs.FileInfo, error)
	Lstat(path string) (fs.FileInfo, error)
	ReadDir(path string) ([]fs.DirEntry, error)
	Readlink(path string) (string, error)

	// Probes: facts that files cannot give.

	// FSType names the filesystem holding path the way `stat -f -c %T` does
	// ("zfs", "fuseblk", "overlayfs", "ext2/ext3", ...).
	FSType(path string) (string, error)
	// NofileHard is the hard RLIMIT_NOFILE of this process.
	NofileHard() (uint64, error)
	// OverlayTrial mounts an overlay filesystem in a fresh temporary directory
	// and removes it again; the error says why overlay cannot be mounted.
	OverlayTrial() error
	// LookupIP resolves host to addresses of one family ("ip4" or "ip6"),
	// the way the C library's getaddrinfo would (hosts file, then DNS).
	LookupIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	// Run starts argv[0] (never a shell) with argv, feeds it stdin, and
	// returns its standard output and standard error (also when it
	// fails), each at most LimitOutput bytes. It is killed after timeout,
	// or when its output passes that limit.
	Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) (stdout, stderr []byte, err error)

	// Changes.

	// WriteFile replaces path atomically: a temporary file in the same
	// directory, synced, then renamed over path.
	WriteFile(path string, data []byte, perm fs.FileMode) error
	// WriteFileInPlace truncates and rewrites path; for bind-mounted files
	// such as /etc/resolv.conf, where a rename over the mount point fails.
	WriteFileInPlace(path string, data []byte) error
	MkdirAll(path string, perm fs.FileMode) error
	// Remove removes a file or an empty directory.
	Remove(path string) error
	Symlink(target, path string) error
	Chown(path string, uid, gid int) error
	Chmod(path string, mode fs.FileMode) error
	Mount(source, target, fstype string, flags MountFlags, data string) error
	Unmount(target string, flags int) error
	Sync()
}
