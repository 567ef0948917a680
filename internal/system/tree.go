package system

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
)

// ProbeDir is the directory inside a Tree that answers the questions files
// cannot: see Tree.
const ProbeDir = ".host"

// Tree is a System rooted at a directory that stands in for a host: a
// captured node (entrypoint --dry-run --root DIR) or a fake one in tests.
//
// Files are the files below Root. Mounts are modelled in Root's
// /proc/self/mountinfo: Mount and Unmount rewrite it the way the kernel
// would, so planning again after applying sees the new state. Bind mounts of
// regular files are followed when reading. Every change is recorded, as one
// line of text, in Changes.
//
// Probes are answered from files in Root/.host/ (all optional):
//
//	statfs      lines "PATH FSTYPE"; otherwise the fstype of the mount
//	            holding PATH in mountinfo, named as statfs names it
//	nofile      the hard RLIMIT_NOFILE (default 1048576)
//	overlay     "ok" (default), or why a trial overlay mount fails
//	hosts       lines "NAME ADDR..." answering LookupIP
//	run/NAME    standard output of the command whose argv[0] base name is NAME;
//	            run/NAME.fail makes it fail with that text,
//	            run/NAME.hang makes it hang until its timeout
type Tree struct {
	Root string

	// Exec, when set, runs commands instead of the run/ files; tests use
	// it to model commands that change state (update-alternatives).
	Exec func(ctx context.Context, argv []string, stdin []byte) ([]byte, error)
	// Fail, when set, is asked before every change ("write", "rename",
	// "mount", ...) and its error is returned instead of making it.
	Fail func(op, path string) error

	// walk resolves paths in user space even where openat2 works
	// (rooted.go, walk); tests set it to cover both ways.
	walk bool

	mu sync.Mutex
	// root is Root, open: every read resolves below it (rooted.go).
	root *os.File
	// files is Root, open to write (tree_write.go).
	files   *TreeFiles
	changes []string
	ran     [][]string
	binds   map[string]string // file bind mounts: target -> source
	// unmounted are mount points unmounted here: what the tree holds below
	// them stood for the unmounted filesystem, so it goes with it.
	unmounted map[string]bool
}

var _ System = (*Tree)(nil)

func NewTree(dir string) *Tree { return &Tree{Root: dir} }

// Changes returns the changes made so far, one line each, in order.
func (t *Tree) Changes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.changes)
}

// Ran returns the argv of every command run so far.
func (t *Tree) Ran() [][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.ran)
}

func (t *Tree) record(format string, args ...any) {
	t.mu.Lock()
	t.changes = append(t.changes, fmt.Sprintf(format, args...))
	t.mu.Unlock()
}

func (t *Tree) fail(op, p string) error {
	if t.Fail == nil {
		return nil
	}
	if err := t.Fail(op, p); err != nil {
		return &fs.PathError{Op: op, Path: p, Err: err}
	}
	return nil
}

// Path maps a node path onto the tree as text, for tests; ".." cannot
// leave the root, but a symlink below it can. Every read and change goes
// through the root instead (openIn, TreeFiles), where symlinks cannot
// leave it.
func (t *Tree) Path(p string) string {
	return filepath.Join(t.Root, filepath.FromSlash(NodePath(p)))
}

// resolve follows a file bind mount, as reading through the kernel would.
func (t *Tree) resolve(p string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.resolveLocked(p)
}

// resolveLocked is resolve, t.mu held.
func (t *Tree) resolveLocked(p string) string {
	if src, ok := t.binds[path.Clean(p)]; ok {
		return src
	}
	return p
}

func (t *Tree) ReadFile(p string, limit int) ([]byte, error) {
	return t.readIn(t.resolve(p), limit, 0)
}

func (t *Tree) Stat(p string) (fs.FileInfo, error) { return t.statIn(p, true) }

func (t *Tree) Lstat(p string) (fs.FileInfo, error) { return t.statIn(p, false) }
