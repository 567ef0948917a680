package system

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/moby/sys/mountinfo"
)

// rootLine is a mountinfo line of a node's root.
const rootLine = "1042 975 0:94 / / rw,relatime master:482 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w"

// FuzzParseMountinfo: any mount table parses as the library parses it, or
// gives an error that names a line of it, is short, and holds no control
// character or invalid UTF-8 (it goes to a log line).
func FuzzParseMountinfo(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "hosts", "*", "root", "proc", "self", "mountinfo"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(rootLine + "\n" + "1046 1042 0:99 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw\n"))
	f.Add([]byte(rootLine + "\r\n" + `1 0 0:1 / /a\040b rw - tmpfs tmpfs rw` + "\n"))
	f.Add([]byte("1 0 \x1b[2J / / rw - tmpfs tmpfs rw\n"))
	f.Add([]byte(""))
	f.Add([]byte("\n" + rootLine + "\r\n \t\n\n"))
	f.Fuzz(func(t *testing.T, table []byte) {
		mi, err := ParseMountinfo(table)
		// Blank lines are skipped; the library refuses them.
		want, libErr := mountinfo.GetMountsFromReader(bytes.NewReader(withoutBlankLines(table)), nil)
		if err != nil {
			msg := err.Error()
			if libErr == nil && len(want) > 0 && !strings.Contains(msg, "not a clean absolute path") {
				t.Fatalf("ParseMountinfo refused what the library reads: %v", err)
			}
			if libErr == nil && len(want) > 0 {
				// Refused for a mount point (or root) the kernel never
				// prints: one of the library's mounts must have it.
				bad := false
				for _, m := range want {
					bad = bad || !cleanAbs(m.Mountpoint) || (strings.HasPrefix(m.Root, "/") && !cleanAbs(withoutLeadingUps(m.Root)))
				}
				if !bad {
					t.Fatalf("ParseMountinfo refused clean mounts: %v", err)
				}
				return
			}
			// A few hundred bytes however long the line: 80 of it
			// quoted, each byte at most 4 when escaped.
			if len(msg) > 1024 {
				t.Fatalf("error is %d bytes long", len(msg))
			}
			for _, r := range msg {
				if r == utf8.RuneError || unicode.IsControl(r) {
					t.Fatalf("error %q holds %q", msg, r)
				}
			}
			if libErr != nil {
				n, convErr := strconv.Atoi(strings.TrimPrefix(strings.SplitN(msg, ":", 2)[0], "line "))
				if convErr != nil || n < 1 || n > bytes.Count(table, []byte("\n"))+1 {
					t.Fatalf("error %q names no line of the table", msg)
				}
			}
			return
		}
		if libErr != nil || len(mi) != len(want) || len(mi) == 0 {
			t.Fatalf("ParseMountinfo read %d mounts, the library %d (%v)", len(mi), len(want), libErr)
		}
		for i := range mi {
			if *mi[i] != *want[i] {
				t.Fatalf("mount %d: %+v, the library reads %+v", i, *mi[i], *want[i])
			}
		}
	})
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
