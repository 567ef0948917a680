package system

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
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
	// (rooted_linux.go, walkIn); tests set it to cover both ways.
	walk bool

	mu sync.Mutex
	// root is Root, open: every read resolves below it (rooted_linux.go).
	root struct {
		file *os.File
		path string
	}
	changes []string
	ran     [][]string
	binds   map[string]string // file bind mounts: target -> source
	// unmounted are mount points unmounted here: what the tree holds below
	// them stood for the unmounted filesystem, so it goes with it.
	unmounted map[string]bool
	// parsed is the last parse of Root's mountinfo and the bytes it came
	// from, for the lookups that only read it (FSType is asked for
	// several paths of one unchanged table in every dry run).
	parsedMu sync.Mutex
	parsed   struct {
		ok      bool
		data    []byte
		mounts  []*mountinfo.Info
		scratch []byte
	}
}

var _ System = (*Tree)(nil)

// NewTree returns a Tree rooted at dir.
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

// Path maps a node path onto the tree as text; ".." cannot leave the root,
// but a symlink below it can. For the tests and for changes: every read
// goes through the root instead (openIn), where symlinks cannot leave it.
func (t *Tree) Path(p string) string {
	// Steps name clean absolute paths: join them with one allocation.
	// filepath.Join would clean the concatenation again (and path.Clean
	// of "/"+p allocates once more), which made path mapping a fifth of
	// a dry run's allocations.
	if len(p) > 1 && p[0] == '/' && path.Clean(p) == p && plainRoot(t.Root) {
		return t.Root + p
	}
	return filepath.Join(t.Root, filepath.FromSlash(path.Clean("/"+p)))
}

// plainRoot reports whether a clean absolute path joins root by
// concatenation: root is clean, and not "", "." or "/".
func plainRoot(root string) bool {
	return root != "" && root != "." && root != "/" && filepath.Clean(root) == root
}

// resolve follows a file bind mount, as reading through the kernel would.
func (t *Tree) resolve(p string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if src, ok := t.binds[path.Clean(p)]; ok {
		return src
	}
	return p
}

func (t *Tree) ReadFile(p string, limit int) ([]byte, error) {
	return t.readIn(t.resolve(p), limit, nil)
}

func (t *Tree) Stat(p string) (fs.FileInfo, error) { return t.statIn(p, true) }

func (t *Tree) Lstat(p string) (fs.FileInfo, error) { return t.statIn(p, false) }

func (t *Tree) ReadDir(p string) ([]fs.DirEntry, error) { return t.readDirIn(p) }

func (t *Tree) Readlink(p string) (string, error) { return t.readlinkIn(p) }

// nodeErr names the node path rather than the tree path in errors, so that
// messages read the same as on a real host.
func (t *Tree) nodeErr(err error) error {
	if err == nil {
		return nil
	}
	// Errors of the os functions are a *fs.PathError itself: asserting
	// that first spares errors.As its allocation (its target escapes) on
	// every missing file a step looks for.
	pe, ok := err.(*fs.PathError)
	if !ok {
		var wrapped *fs.PathError
		if !errors.As(err, &wrapped) {
			return err
		}
		pe = wrapped
	}
	// What Path made by concatenation: cut the root off again, without
	// filepath.Rel's allocations.
	if rest, ok := strings.CutPrefix(pe.Path, t.Root); ok && plainRoot(t.Root) &&
		len(rest) > 1 && rest[0] == '/' && !strings.HasPrefix(rest, "/..") && path.Clean(rest) == rest {
		pe.Path = rest
		return err
	}
	if rel, rerr := filepath.Rel(t.Root, pe.Path); rerr == nil && !strings.HasPrefix(rel, "..") {
		pe.Path = "/" + filepath.ToSlash(rel)
		if pe.Path == "/." {
			pe.Path = "/"
		}
	}
	return err
}

// probe reads the probe file .host/NAME (at most limit bytes); ok is
// false when it cannot be read.
func (t *Tree) probe(name string, limit int) ([]byte, bool) {
	b, err := t.readIn("/"+ProbeDir+"/"+name, limit, nil)
	return b, err == nil
}

func (t *Tree) FSType(p string) (string, error) {
	p = path.Clean(p)
	// statfs(2) of a path that does not exist fails; so must a replay.
	// (A stat(2) of its own, not os.Stat: only whether it succeeds
	// counts, not a FileInfo.)
	if _, err := t.Stat(p); err != nil {
		return "", &fs.PathError{Op: "statfs", Path: p, Err: fs.ErrNotExist}
	}
	if b, ok := t.probe("statfs", LimitConfig); ok {
		best, bestType := "", ""
		for line := range strings.Lines(string(b)) {
			f, ok := twoFields(line)
			if ok && isUnder(p, f[0]) && len(f[0]) >= len(best) {
				best, bestType = f[0], f[1]
			}
		}
		if bestType != "" {
			return bestType, nil
		}
	}
	mounts, err := t.readMounts()
	if err != nil {
		return "", fmt.Errorf("statfs %s: %w", p, err)
	}
	if m := containing(mounts, p); m != nil {
		return FSTypeFromMountinfo(m.FSType), nil
	}
	return "", fmt.Errorf("statfs %s: %s has no mount holding it (no mount at /)", p, MountinfoPath)
}

func (t *Tree) NofileHard() (uint64, error) {
	b, ok := t.probe("nofile", LimitValue)
	if !ok {
		return 1 << 20, nil
	}
	s := strings.TrimSpace(string(b))
	if s == "unlimited" {
		return unix.RLIM_INFINITY, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/nofile: %w", ProbeDir, err)
	}
	return n, nil
}

func (t *Tree) OverlayTrial() error {
	b, ok := t.probe("overlay", LimitValue)
	if !ok {
		return nil
	}
	if s := strings.TrimSpace(string(b)); s != "ok" {
		return errors.New(s)
	}
	return nil
}

func (t *Tree) LookupIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	b, _ := t.probe("hosts", LimitConfig)
	var out []netip.Addr
	for line := range strings.Lines(string(b)) {
		// "NAME ADDR...", or "NAME hang".
		i := 0
		for f := range strings.FieldsSeq(line) {
			if i == 0 && f != host {
				break
			}
			if i == 1 && f == "hang" {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			if i >= 1 {
				a, err := netip.ParseAddr(f)
				if err == nil && ((network == "ip4" && a.Is4()) || (network == "ip6" && a.Is6()) || network == "ip") {
					out = append(out, a)
				}
			}
			i++
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// twoFields returns the fields of a line that has exactly two, as
// strings.Fields would split it, without allocating the slice.
func twoFields(line string) (f [2]string, ok bool) {
	n := 0
	for s := range strings.FieldsSeq(line) {
		if n == 2 {
			return f, false
		}
		f[n] = s
		n++
	}
	return f, n == 2
}

// Run answers from Exec or the run/ files; a replayed command prints
// nothing on standard error.
func (t *Tree) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, []byte, error) {
	out, err := t.run(ctx, argv, stdin, timeout)
	return out, nil, err
}

func (t *Tree) run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("run: empty argv")
	}
	t.mu.Lock()
	t.ran = append(t.ran, slices.Clone(argv))
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if t.Exec != nil {
		out, err := t.Exec(ctx, argv, stdin)
		if ctx.Err() == context.DeadlineExceeded {
			return out, &TimeoutError{What: argv[0], After: timeout}
		}
		return out, err
	}
	name := "run/" + path.Base(argv[0])
	if _, ok := t.probe(name+".hang", LimitValue); ok {
		<-ctx.Done()
		return nil, &TimeoutError{What: argv[0], After: timeout}
	}
	if b, ok := t.probe(name+".fail", LimitConfig); ok {
		return nil, fmt.Errorf("%s: %s", argv[0], strings.TrimSpace(string(b)))
	}
	b, err := t.readIn("/"+ProbeDir+"/"+name, LimitOutput, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NotInstalledError{Name: argv[0]}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	return b, nil
}

func (t *Tree) WriteFile(p string, data []byte, perm fs.FileMode) error {
	if err := t.fail("write", p); err != nil {
		return err
	}
	if t.isMountpoint(p) {
		// rename(2) over a mount point fails; the kernel says EBUSY.
		return &fs.PathError{Op: "rename", Path: p, Err: unix.EBUSY}
	}
	real := t.Path(p)
	f, err := os.CreateTemp(filepath.Dir(real), "."+filepath.Base(real)+".tmp-")
	if err != nil {
		return t.nodeErr(err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp, perm), t.fail("rename", p)); err != nil {
		os.Remove(tmp)
		return t.nodeErr(err)
	}
	if err := os.Rename(tmp, real); err != nil {
		os.Remove(tmp)
		return t.nodeErr(err)
	}
	t.record("write %s %#o %s", p, perm.Perm(), describe(data))
	return nil
}

func (t *Tree) WriteFileInPlace(p string, data []byte) error {
	if err := t.fail("write-in-place", p); err != nil {
		return err
	}
	if err := writeInPlace(t.Path(t.resolve(p)), data); err != nil {
		return t.nodeErr(err)
	}
	t.record("write-in-place %s %s", p, describe(data))
	return nil
}

// describe summarises file content for the change log: short text in full.
func describe(data []byte) string {
	if len(data) <= 120 {
		return strconv.Quote(string(data))
	}
	return fmt.Sprintf("(%d bytes)", len(data))
}

func (t *Tree) MkdirAll(p string, perm fs.FileMode) error {
	if err := t.fail("mkdir", p); err != nil {
		return err
	}
	if fi, err := t.Stat(p); err == nil && fi.IsDir() {
		return nil
	}
	if err := os.MkdirAll(t.Path(p), perm); err != nil {
		return t.nodeErr(err)
	}
	t.record("mkdir %s", p)
	return nil
}

func (t *Tree) Remove(p string) error {
	if err := t.fail("remove", p); err != nil {
		return err
	}
	if t.isMountpoint(p) {
		return &fs.PathError{Op: "remove", Path: p, Err: unix.EBUSY}
	}
	t.mu.Lock()
	wasMount := t.unmounted[path.Clean(p)]
	t.mu.Unlock()
	if wasMount {
		if err := removeContents(t.Path(p)); err != nil {
			return t.nodeErr(err)
		}
	}
	if err := os.Remove(t.Path(p)); err != nil {
		return t.nodeErr(err)
	}
	t.record("remove %s", p)
	return nil
}

func removeContents(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tree) Symlink(target, p string) error {
	if err := t.fail("symlink", p); err != nil {
		return err
	}
	if err := os.Symlink(target, t.Path(p)); err != nil {
		return t.nodeErr(err)
	}
	t.record("symlink %s -> %s", p, target)
	return nil
}

// Chown changes the owner when running as root; otherwise it is only
// recorded.
func (t *Tree) Chown(p string, uid, gid int) error {
	if err := t.fail("chown", p); err != nil {
		return err
	}
	if _, err := os.Stat(t.Path(p)); err != nil {
		return t.nodeErr(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(t.Path(p), uid, gid); err != nil {
			return t.nodeErr(err)
		}
	}
	t.record("chown %s %d:%d", p, uid, gid)
	return nil
}

func (t *Tree) Chmod(p string, mode fs.FileMode) error {
	if err := t.fail("chmod", p); err != nil {
		return err
	}
	if err := os.Chmod(t.Path(p), mode); err != nil {
		return t.nodeErr(err)
	}
	t.record("chmod %s %s", p, mode)
	return nil
}

func (t *Tree) Sync() { t.record("sync") }

// Environ returns the environment recorded in Root/.host/environ (one
// KEY=VALUE a line, or NUL-separated as in /proc/PID/environ), and whether
// that file exists.
func (t *Tree) Environ() (lookup func(string) (string, bool), ok bool) {
	b, ok := t.probe("environ", LimitConfig)
	if !ok {
		return func(string) (string, bool) { return "", false }, false
	}
	env := ParseEnviron(b)
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }, true
}

// ParseEnviron parses KEY=VALUE entries separated by NUL bytes, or by
// newlines when there is no NUL; in that form a CR before the newline
// ends the line too (a file written on another system), as for every
// table a host is read from. Only the NUL form holds a value ending in CR.
func ParseEnviron(b []byte) map[string]string {
	sep := "\n"
	if bytes.IndexByte(b, 0) >= 0 {
		sep = "\x00"
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), sep) {
		if sep == "\n" {
			kv = strings.TrimSuffix(kv, "\r")
		}
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
}

// Rand returns the randomness recorded for this tree: a deterministic
// stream seeded from Root/.host/random, so that a replayed plan (new
// machine-id, product_uuid) is the same every time; ok is false without
// that file.
func (t *Tree) Rand() (r io.Reader, ok bool) {
	b, ok := t.probe("random", LimitValue)
	if !ok {
		return nil, false
	}
	return SeededRand(strings.TrimSpace(string(b))), true
}

// SeededRand is a deterministic random stream: ChaCha8 keyed with the first
// 32 bytes of seed.
func SeededRand(seed string) io.Reader {
	var key [32]byte
	copy(key[:], seed)
	return rand.NewChaCha8(key)
}
