package system

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// MountinfoPath is the mount table every step and command reads.
const MountinfoPath = "/proc/self/mountinfo"

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
	mi, err := mountinfo.GetMountsFromReader(bytes.NewReader(withoutBlankLines(b)), nil)
	if err != nil {
		return nil, mountinfoLineError(b, err)
	}
	if len(mi) == 0 {
		return nil, errors.New("no mounts")
	}
	// The kernel prints mount points (and roots that are paths) clean and
	// absolute; anything else is a forged table, and a mount point with
	// ".." would lead the steps' mkdir, mount and umount elsewhere. The
	// one exception is real: in a cgroup namespace, a cgroup mount's root
	// outside the namespace's cgroup is shown relative to it, "/../.."
	// (cgroup_show_path), as in /proc/self/cgroup. Whoever joins a root
	// to a path must refuse those (cgroupfix does).
	for i, m := range mi {
		if !cleanAbs(m.Mountpoint) || (strings.HasPrefix(m.Root, "/") && !cleanAbs(withoutLeadingUps(m.Root))) {
			return nil, fmt.Errorf("mount %d (ID %d): mount point %s, root %s: not a clean absolute path", i+1, m.ID, logline.QuoteClipped(m.Mountpoint), logline.QuoteClipped(m.Root))
		}
	}
	return mi, nil
}

// withoutBlankLines is b without its blank lines (nothing but blanks and
// line ends); b itself, not a copy, when it has none.
func withoutBlankLines(b []byte) []byte {
	blank := false
	for line := range bytes.Lines(b) {
		blank = blank || isBlankLine(line)
	}
	if !blank {
		return b
	}
	out := make([]byte, 0, len(b))
	for line := range bytes.Lines(b) {
		if !isBlankLine(line) {
			out = append(out, line...)
		}
	}
	return out
}

func isBlankLine(line []byte) bool { return len(bytes.TrimSpace(line)) == 0 }

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

// cleanAbs reports whether p is absolute and clean: no ".", "..", "//"
// or trailing "/" (as path.Clean would give).
func cleanAbs(p string) bool { return strings.HasPrefix(p, "/") && path.Clean(p) == p }

// mountinfoLineError finds the line the parser refused by parsing each
// line on its own (only on this error path), and words its error.
func mountinfoLineError(b []byte, err error) error {
	n := 0
	for line := range bytes.Lines(b) {
		n++
		if isBlankLine(line) {
			continue
		}
		_, lerr := mountinfo.GetMountsFromReader(bytes.NewReader(line), nil)
		if lerr == nil {
			continue
		}
		if errors.Is(lerr, bufio.ErrTooLong) {
			return fmt.Errorf("line %d: longer than %d bytes", n, bufio.MaxScanTokenSize)
		}
		// The scanner drops the newline and a CR before it.
		text := string(bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")))
		why := lerr.Error()
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
	return err
}
