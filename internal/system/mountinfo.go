package system

import (
	"bufio"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// MountinfoPath is the mount table every step and command reads.
const MountinfoPath = "/proc/self/mountinfo"

// MaxMountPath is the longest mount point, or root, a mount table may
// hold: PATH_MAX, the longest path mount(2) takes. A real node's are far
// shorter. A path is walked by its ancestors (plan.Preflight, Resolve),
// each asked of the kernel by its whole path again, so the cost of one
// grows with the square of its depth: at this cap 2000 levels, 0.8 s of
// CPU for 1024 cgroup mounts there (docs/performance.md); at the line's
// own cap (64 KiB, 32k levels) it was 2.6 s for one.
const MaxMountPath = 4096

// ReadMountinfo reads and parses sys's mount table.
func ReadMountinfo(sys System) ([]*mountinfo.Info, error) {
	b, err := sys.ReadFile(MountinfoPath, LimitTable)
	if err != nil {
		return nil, err
	}
	return ParseMountinfoFile(b)
}

// ParseMountinfoFile is ParseMountinfo, its errors naming MountinfoPath.
func ParseMountinfoFile(b []byte) ([]*mountinfo.Info, error) {
	mi, err := ParseMountinfo(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MountinfoPath, err)
	}
	return mi, nil
}

// ParseMountinfo parses a mount table: the one parser of every step,
// command and replayed host. An error names the line that cannot be read
// and quotes it, clipped: the library's own message holds the whole line
// as it is, which may be kilobytes of binary. A table without a single
// mount is an error too: a process always sees the mount holding its root,
// so it is a broken capture, not a host. A blank line (a fake tree's or
// a capture's trailing newline, which the kernel never prints) is skipped,
// as every other table parser of the steps skips one; the library refuses
// it as a line of too few fields.
func ParseMountinfo(b []byte) ([]*mountinfo.Info, error) {
	return parseMountinfo(string(b))
}

// parseMountinfo is ParseMountinfo of text. It reads each line as the
// library reads it (the fuzzer compares them), with one allocation for
// all its mounts instead of three or four for each: its strings are
// text's own, escapes aside. A table at its 16 MiB cap holds 350k short
// mounts; the library's parse allocated 780 bytes each, 270 MiB. A line
// this parse does not read (one the library refuses, or one too long for
// this parse's reckoning of the library's scanner) goes to the library on
// its own: its mount, or the error that names the line. The library never
// reads the whole table, which a bad last line made it do before.
func parseMountinfo(text string) ([]*mountinfo.Info, error) {
	n := 0 // lines that are not blank: a table of blank lines holds none
	for line := range strings.Lines(text) {
		if len(strings.TrimSpace(line)) != 0 {
			n++
		}
	}
	if n == 0 {
		return nil, errors.New("no mounts")
	}
	infos := make([]mountinfo.Info, 0, n)
	var fields []string // one line's, reused
	lineNo := 0
	for line := range strings.Lines(text) {
		lineNo++
		if len(strings.TrimSpace(line)) == 0 {
			continue
		}
		var info mountinfo.Info
		if len(line) < bufio.MaxScanTokenSize && parseMountinfoLine(line, &fields, &info) {
			infos = append(infos, info)
			continue
		}
		m, err := mountinfo.GetMountsFromReader(strings.NewReader(line), nil)
		if err != nil || len(m) != 1 {
			return nil, mountinfoLineError(line, lineNo, err)
		}
		infos = append(infos, *m[0])
	}
	// The kernel prints mount points (and roots that are paths) clean and
	// absolute; anything else is a forged table, and a mount point with
	// ".." would lead the steps' mkdir, mount and umount elsewhere. The
	// one exception is real: in a cgroup namespace, a cgroup mount's root
	// outside the namespace's cgroup is shown relative to it, "/../.."
	// (cgroup_show_path), as in /proc/self/cgroup. Whoever joins a root
	// to a path must refuse those (cgroupfix does).
	mi := make([]*mountinfo.Info, len(infos))
	for i := range infos {
		m := &infos[i]
		for _, f := range []struct{ name, path string }{{"mount point", m.Mountpoint}, {"root", m.Root}} {
			if len(f.path) > MaxMountPath {
				return nil, fmt.Errorf("mount %d (ID %d): %s of %d bytes, longer than %d (PATH_MAX, MaxMountPath)", i+1, m.ID, f.name, len(f.path), MaxMountPath)
			}
		}
		if !cleanAbs(m.Mountpoint) || (strings.HasPrefix(m.Root, "/") && !cleanAbs(withoutLeadingUps(m.Root))) {
			return nil, fmt.Errorf("mount %d (ID %d): mount point %s, root %s: not a clean absolute path", i+1, m.ID, logline.QuoteClipped(m.Mountpoint), logline.QuoteClipped(m.Root))
		}
		mi[i] = m
	}
	return mi, nil
}

// parseMountinfoLine reads one line of a mount table, not blank, into
// info, and is false when the library would refuse it. fields is the
// split's buffer, reused from line to line.
func parseMountinfoLine(line string, fields *[]string, info *mountinfo.Info) bool {
	// The scanner's line: without its newline and one CR before it.
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	// Split at each space, a byte at a time: most lines are short, and a
	// call per field (strings.Cut) was a third of the parse.
	f := (*fields)[:0]
	start := 0
	for i := 0; i < len(line); i++ {
		if line[i] == ' ' {
			f = append(f, line[start:i])
			start = i + 1
		}
	}
	f = append(f, line[start:])
	*fields = f
	// Six fields, the optional ones, "-", then three (the last one may
	// hold spaces, as old kernels printed a cifs source).
	if len(f) < 10 {
		return false
	}
	sep := len(f) - 4
	for f[sep] != "-" {
		if sep--; sep == 5 {
			return false
		}
	}
	major, minor, found := strings.Cut(f[2], ":")
	if !found {
		return false
	}
	*info = mountinfo.Info{
		ID:         atoiOrZero(f[0]),
		Parent:     atoiOrZero(f[1]),
		Major:      atoiOrZero(major),
		Minor:      atoiOrZero(minor),
		Root:       unescapeOctal(f[3]),
		Mountpoint: unescapeOctal(f[4]),
		Options:    f[5],
		Optional:   strings.Join(f[6:sep], " "),
		FSType:     unescapeOctal(f[sep+1]),
		Source:     unescapeOctal(f[sep+2]),
		VFSOptions: f[sep+3],
	}
	return true
}

// atoiOrZero is s as a decimal number, 0 if it is not one (as the library
// reads a number field).
func atoiOrZero(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// unescapeOctal undoes the kernel's escapes of a mountinfo path field: a
// backslash and three octal digits, the first 0 or 1 (space, tab,
// newline, backslash). Anything else stays as it is. s itself when it has
// no backslash.
func unescapeOctal(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+3 < len(s) && (s[i+1] == '0' || s[i+1] == '1') && isOctal(s[i+2]) && isOctal(s[i+3]) {
			c = (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			i += 3
		}
		out = append(out, c)
	}
	return string(out)
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// shared is the last mount table parsed for reading only, and its text:
// the steps' MountTable and a Tree's lookups (FSType) read the same table,
// which at its 16 MiB cap parses to some 70 MiB. One parse of
// it is kept, whoever reads it; a table that changed is parsed again. A
// table refused keeps its error: check's rows each read the table, and
// parsed a bad one again each time (a bad last line costs a whole parse).
var shared struct {
	mu   sync.Mutex
	text string
	mi   []*mountinfo.Info
	err  error
}

// parseShared is ParseMountinfoFile for reading only: what it returns is
// shared, and must never be changed.
func parseShared(b []byte) ([]*mountinfo.Info, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if (shared.mi != nil || shared.err != nil) && string(b) == shared.text {
		return shared.mi, shared.err
	}
	text := string(b)
	mi, err := parseMountinfo(text)
	if err != nil {
		err = fmt.Errorf("%s: %w", MountinfoPath, err)
	}
	shared.text, shared.mi, shared.err = text, mi, err
	return mi, err
}

// sharedIfSame is the shared parse when the regular file open at fd holds
// its text, which it compares a chunk at a time, holding no copy.
func sharedIfSame(fd int) ([]*mountinfo.Info, bool) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	var st unix.Stat_t
	if shared.mi == nil || unix.Fstat(fd, &st) != nil || st.Size != int64(len(shared.text)) {
		return nil, false
	}
	buf := make([]byte, 64<<10)
	for off := 0; ; {
		n, err := unix.Pread(fd, buf, int64(off))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, false
		case n == 0:
			return shared.mi, off == len(shared.text)
		case off+n > len(shared.text) || string(buf[:n]) != shared.text[off:off+n]:
			return nil, false
		}
		off += n
	}
}

// withoutLeadingUps is root without its leading "/.." components.
func withoutLeadingUps(root string) string {
	for strings.HasPrefix(root, "/..") && (len(root) == 3 || root[3] == '/') {
		root = root[3:]
	}
	if root == "" {
		return "/"
	}
	return root
}

// NodePath is p as a clean absolute node path, path.Clean("/"+p): p
// itself, not a copy, when it already is one, as nearly every path asked
// is (the copy was most of a capture's memory for paths).
func NodePath(p string) string {
	if cleanAbs(p) {
		return p
	}
	return path.Clean("/" + p)
}

// cleanAbs reports whether p is absolute and clean: no ".", "..", "//"
// or trailing "/" (as path.Clean would give). It only looks, a byte at a
// time: path.Clean builds its answer, which for every stat of every
// ancestor of a 4 KiB mount point was a tenth of a capture's CPU.
func cleanAbs(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) < 2 || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	start := 1
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if c := p[start:i]; c == "" || c == "." || c == ".." {
				return false
			}
			start = i + 1
		}
	}
	return true
}

// mountinfoLineError words the library's error for line, number n of
// the table, read on its own.
func mountinfoLineError(line string, n int, err error) error {
	if err == nil {
		// a line is one mount or an error; say so if it ever is not
		err = errors.New("not one mount")
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("line %d: longer than %d bytes", n, bufio.MaxScanTokenSize)
	}
	// The scanner drops the newline and a CR before it.
	text := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	why := err.Error()
	if rest, ok := strings.CutPrefix(why, "parsing '"+text+"' failed: "); ok {
		why = rest
	}
	// The library's reason may quote a field of the line too.
	const maxWhy = 160
	if len(why) > maxWhy {
		why = why[:maxWhy] + "..."
	}
	return fmt.Errorf("line %d: %s: %s", n, logline.QuoteClipped(text), logline.Escape(why))
}
