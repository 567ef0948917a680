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

func (t *Tree) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, error) {
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

const mountinfoPath = "/proc/self/mountinfo"

func (t *Tree) mounts() ([]*mountinfo.Info, error) {
	b, err := t.readIn(mountinfoPath, LimitTable, nil)
	if err != nil {
		return nil, err
	}
	return ParseMountinfoFile(b)
}

// readMounts is mounts for reading only: the result is shared, and must
// not be changed. It is parsed again only when the file changed. FSType
// reads the file for every path it is asked about: it is read into a
// buffer kept for that (the bytes of the last parse and a scratch one,
// swapped when the file changed).
func (t *Tree) readMounts() ([]*mountinfo.Info, error) {
	t.parsedMu.Lock()
	defer t.parsedMu.Unlock()
	b, err := t.readIn(mountinfoPath, LimitTable, t.parsed.scratch)
	if err != nil {
		return nil, err
	}
	if t.parsed.ok && bytes.Equal(b, t.parsed.data) {
		t.parsed.scratch = b
		return t.parsed.mounts, nil
	}
	mounts, err := ParseMountinfoFile(b)
	if err != nil {
		t.parsed.scratch = b
		return nil, err
	}
	t.parsed.ok, t.parsed.mounts = true, mounts
	t.parsed.data, t.parsed.scratch = b, t.parsed.data
	return mounts, nil
}

func (t *Tree) isMountpoint(p string) bool {
	mounts, err := t.readMounts()
	if err != nil {
		return false
	}
	p = path.Clean(p)
	for _, m := range mounts {
		if m.Mountpoint == p {
			return true
		}
	}
	return false
}

func (t *Tree) Mount(source, target, fstype string, flags MountFlags, data string) error {
	mErr := func(err error) error {
		return &MountError{Op: "mount", Source: source, Target: target, FSType: fstype, Flags: flags, Data: data, Err: err}
	}
	if err := t.fail("mount", target); err != nil {
		return mErr(errors.Unwrap(err))
	}
	mounts, err := t.mounts()
	if err != nil {
		return mErr(err)
	}
	target = path.Clean(target)
	if _, err := t.Stat(target); err != nil {
		return mErr(unix.ENOENT)
	}
	const propagation = Shared | Private | Slave
	switch {
	case flags&propagation != 0:
		if Top(mounts, target) == nil {
			return mErr(unix.EINVAL)
		}
		for _, m := range mounts {
			if m.Mountpoint == target || (flags&Rec != 0 && isUnder(m.Mountpoint, target)) {
				m.Optional = propagate(m.Optional, flags, mounts)
			}
		}
	case flags&Remount != 0:
		m := Top(mounts, target)
		if m == nil {
			return mErr(unix.EINVAL)
		}
		m.Options = OptionsFromFlags(flags)
		if flags&Bind == 0 {
			// A plain remount changes the superblock, seen by every
			// mount of it in every namespace.
			m.VFSOptions = setFirstOption(m.VFSOptions, flags&ReadOnly != 0)
		}
	case flags&Bind != 0:
		src := containing(mounts, source)
		if src == nil {
			return mErr(unix.ENOENT)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(path.Clean(source), src.Mountpoint), "/")
		n := *src
		n.ID = nextID(mounts)
		n.Parent = parentID(mounts, target)
		n.Root = path.Join(src.Root, rel)
		n.Mountpoint = target
		mounts = append(mounts, &n)
		if fi, err := t.Stat(source); err == nil && fi.Mode().IsRegular() {
			t.mu.Lock()
			if t.binds == nil {
				t.binds = map[string]string{}
			}
			t.binds[target] = t.resolveLocked(source)
			t.mu.Unlock()
		}
	default:
		mounts = append(mounts, &mountinfo.Info{
			ID: nextID(mounts), Parent: parentID(mounts, target), Root: "/",
			Mountpoint: target, Options: OptionsFromFlags(flags), FSType: fstype,
			Source: source, VFSOptions: setFirstOption(data, flags&ReadOnly != 0),
		})
	}
	if err := t.writeMounts(mounts); err != nil {
		return mErr(err)
	}
	if source == "" {
		source = "none"
	}
	t.record("mount %s on %s (%s)", source, target, flags)
	return nil
}

func (t *Tree) resolveLocked(p string) string {
	if src, ok := t.binds[path.Clean(p)]; ok {
		return src
	}
	return path.Clean(p)
}

func (t *Tree) Unmount(target string, flags int) error {
	if err := t.fail("umount", target); err != nil {
		return &MountError{Op: "umount", Target: target, Err: errors.Unwrap(err)}
	}
	mounts, err := t.mounts()
	if err != nil {
		return &MountError{Op: "umount", Target: target, Err: err}
	}
	target = path.Clean(target)
	i := len(mounts) - 1
	for i >= 0 && mounts[i].Mountpoint != target {
		i--
	}
	if i < 0 {
		return &MountError{Op: "umount", Target: target, Err: unix.EINVAL}
	}
	mounts = slices.Delete(mounts, i, i+1)
	t.mu.Lock()
	delete(t.binds, target)
	if Top(mounts, target) == nil {
		if t.unmounted == nil {
			t.unmounted = map[string]bool{}
		}
		t.unmounted[target] = true
	}
	t.mu.Unlock()
	if err := t.writeMounts(mounts); err != nil {
		return &MountError{Op: "umount", Target: target, Err: err}
	}
	t.record("umount %s", target)
	return nil
}

func (t *Tree) writeMounts(mounts []*mountinfo.Info) error {
	var b strings.Builder
	for _, m := range mounts {
		b.WriteString(FormatMountinfo(m))
		b.WriteByte('\n')
	}
	return os.WriteFile(t.Path(mountinfoPath), []byte(b.String()), 0o444)
}

// FormatMountinfo renders one mountinfo line, escaping as the kernel does.
func FormatMountinfo(m *mountinfo.Info) string {
	fields := []string{
		strconv.Itoa(m.ID), strconv.Itoa(m.Parent),
		fmt.Sprintf("%d:%d", m.Major, m.Minor),
		escapeMountinfo(m.Root), escapeMountinfo(m.Mountpoint), m.Options,
	}
	if m.Optional != "" {
		fields = append(fields, m.Optional)
	}
	fields = append(fields, "-", m.FSType, escapeMountinfo(m.Source), m.VFSOptions)
	return strings.Join(fields, " ")
}

func escapeMountinfo(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isUnder(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// containing is the mount that holds path p: the deepest mount point above
// it, the latest one where several stack.
func containing(mounts []*mountinfo.Info, p string) *mountinfo.Info {
	var best *mountinfo.Info
	for _, m := range mounts {
		if isUnder(p, m.Mountpoint) && (best == nil || len(m.Mountpoint) >= len(best.Mountpoint)) {
			best = m
		}
	}
	return best
}

func nextID(mounts []*mountinfo.Info) int {
	id := 0
	for _, m := range mounts {
		id = max(id, m.ID)
	}
	return id + 1
}

func parentID(mounts []*mountinfo.Info, target string) int {
	if m := containing(mounts, target); m != nil {
		return m.ID
	}
	return 0
}

// propagate rewrites the optional fields of a mountinfo line for a change
// of propagation type.
func propagate(optional string, flags MountFlags, mounts []*mountinfo.Info) string {
	var keep []string
	shared := false
	for _, f := range strings.Fields(optional) {
		switch {
		case strings.HasPrefix(f, "shared:"):
			shared = true
			if flags&Shared != 0 {
				keep = append(keep, f)
			}
		case strings.HasPrefix(f, "master:"):
			if flags&Private == 0 {
				keep = append(keep, f)
			}
		default:
			keep = append(keep, f)
		}
	}
	if flags&Shared != 0 && !shared {
		keep = append([]string{"shared:" + strconv.Itoa(nextPeerGroup(mounts))}, keep...)
	}
	return strings.Join(keep, " ")
}

func nextPeerGroup(mounts []*mountinfo.Info) int {
	n := 0
	for _, m := range mounts {
		for _, f := range strings.Fields(m.Optional) {
			if v, ok := strings.CutPrefix(f, "shared:"); ok {
				if i, err := strconv.Atoi(v); err == nil {
					n = max(n, i)
				}
			}
		}
	}
	return n + 1
}

func setFirstOption(opts string, ro bool) string {
	want := "rw"
	if ro {
		want = "ro"
	}
	if opts == "" {
		return want
	}
	first, rest, _ := strings.Cut(opts, ",")
	if first == "rw" || first == "ro" {
		if rest == "" {
			return want
		}
		return want + "," + rest
	}
	return want + "," + opts
}

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
// newlines when there is no NUL.
func ParseEnviron(b []byte) map[string]string {
	sep := "\n"
	if bytes.IndexByte(b, 0) >= 0 {
		sep = "\x00"
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), sep) {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
}

// CopyDir copies the tree at src to dst (which may exist): directories,
// regular files with their mode bits, and symlinks as links.
func CopyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, b, info.Mode().Perm()); err != nil {
				return err
			}
			return os.Chmod(target, info.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
		}
		return fmt.Errorf("%s: cannot copy %s", p, info.Mode().Type())
	})
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

// CopyScenario copies a fake host kept in git (testdata/hosts/NAME/root)
// to dst as a fresh clone would hold it, whatever the working tree's modes:
// files 0644, or 0755 when executable, directories 0755. Then it applies
// root/.host/modes, lines "PATH OCTAL-MODE [UID:GID]", for what git cannot
// store (setuid bits, 0600 keys, owners; owners need root).
func CopyScenario(src, dst string) error {
	if err := CopyDir(src, dst); err != nil {
		return err
	}
	err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if d.IsDir() || info.Mode()&0o100 != 0 {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dst, ProbeDir, "modes"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(err error) error { return fmt.Errorf("%s/modes: line %d: %q: %w", ProbeDir, i+1, line, err) }
		if len(f) < 2 || len(f) > 3 {
			return bad(errors.New("want PATH OCTAL-MODE [UID:GID]"))
		}
		mode, err := strconv.ParseUint(f[1], 8, 32)
		if err != nil || mode > 0o7777 {
			return bad(errors.New("bad mode"))
		}
		p := filepath.Join(dst, filepath.FromSlash(path.Clean("/"+f[0])))
		if len(f) == 3 {
			u, g, _ := strings.Cut(f[2], ":")
			uid, err1 := strconv.Atoi(u)
			gid, err2 := strconv.Atoi(g)
			if err := errors.Join(err1, err2); err != nil {
				return bad(err)
			}
			if err := os.Lchown(p, uid, gid); err != nil {
				return bad(err)
			}
		}
		m := fs.FileMode(mode & 0o777)
		if mode&0o4000 != 0 {
			m |= fs.ModeSetuid
		}
		if mode&0o2000 != 0 {
			m |= fs.ModeSetgid
		}
		if mode&0o1000 != 0 {
			m |= fs.ModeSticky
		}
		if err := os.Chmod(p, m); err != nil {
			return bad(err)
		}
	}
	return nil
}

// WriteFiles lays out a small host below dir, for tests: each entry is a
// file with that content, a directory when its path ends in "/", or a
// symlink when its content is "->TARGET".
func WriteFiles(dir string, files map[string]string) error {
	for p, content := range files {
		full := filepath.Join(dir, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
