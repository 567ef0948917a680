package system

import (
	"fmt"
	"path"
	"strings"
	"testing"
)

// TestCleanAbs: cleanAbs says what path.Clean would, for every path of up
// to 7 bytes of '/', '.' and 'a'.
func TestCleanAbs(t *testing.T) {
	var paths func(prefix string, n int)
	paths = func(p string, n int) {
		if want := strings.HasPrefix(p, "/") && path.Clean(p) == p; cleanAbs(p) != want {
			t.Errorf("cleanAbs(%q) = %t, path.Clean says %t", p, !want, want)
		}
		if n > 0 {
			for _, c := range []string{"/", ".", "a"} {
				paths(p+c, n-1)
			}
		}
	}
	paths("", 7)
}

// TestParent: Parent is path.Dir of a clean path.
func TestParent(t *testing.T) {
	for p, want := range map[string]string{"/": "/", "/a": "/", "/a/b": "/a", "a": ".", "a/b": "a", strings.Repeat("/x", 3): "/x/x"} {
		if got := Parent(p); got != want {
			t.Errorf("Parent(%q) = %q, want %q", p, got, want)
		}
	}
}

// TestUnder: Under is what its one-allocation form said.
func TestUnder(t *testing.T) {
	for _, p := range []string{"/", "/a", "/a/b", "/ab", "/a/", "/b"} {
		for _, dir := range []string{"/", "/a", "/a/b", "/ab", ""} {
			want := p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
			if got := Under(p, dir); got != want {
				t.Errorf("Under(%q, %q) = %t, want %t", p, dir, got, want)
			}
		}
	}
}

// BenchmarkParseMountinfoShortest parses a table at its 16 MiB cap of the
// shortest lines a mount can have (730k mounts), the parse that costs
// the most per byte.
func BenchmarkParseMountinfoShortest(b *testing.B) {
	table := []byte(strings.Repeat("1 1 0:1 / /m r - t t r\n", LimitTable/23))
	b.SetBytes(int64(len(table)))
	for b.Loop() {
		if _, err := ParseMountinfo(table); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMountPathCap: a mount point or root longer than MaxMountPath is
// refused with an error naming its mount; one at the cap is read.
func TestMountPathCap(t *testing.T) {
	at := "/m" + strings.Repeat("/k", (MaxMountPath-2)/2)
	over := at + "/k"
	for _, tc := range []struct {
		name, line string
		refused    bool
	}{
		{"mount point at the cap", "25 1 0:1 / " + at + " rw - tmpfs t rw\n", false},
		{"mount point over the cap", "25 1 0:1 / " + over + " rw - tmpfs t rw\n", true},
		{"root over the cap", "25 1 0:1 " + over + " /m rw - tmpfs t rw\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mi, err := ParseMountinfo([]byte("24 1 0:2 / / rw - ext4 /dev/sda rw\n" + tc.line))
			if !tc.refused {
				if err != nil || len(mi) != 2 {
					t.Fatalf("%d mounts, %v", len(mi), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "mount 2 (ID 25)") || !strings.Contains(err.Error(), "MaxMountPath") {
				t.Errorf("error %v, want one naming mount 2 (ID 25) and the cap", err)
			}
		})
	}
}

// TestParseMountinfoBadLastLine: a table of short mounts whose last line
// the library refuses costs no more to refuse than to read without that
// line (the line's error aside), and the error names it. The library read
// the whole table before, to name the line: 270 MiB for a table at its
// cap, 17 MiB for this one of 1 MiB.
func TestParseMountinfoBadLastLine(t *testing.T) {
	good := strings.Repeat("1 1 0:1 / /m r - t t r\n", (1<<20)/23)
	bad := good + "1 1 0:1 / /m r x t t r\n"
	parseBytes := func(table []byte, ok bool) int64 {
		return testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				if _, err := ParseMountinfo(table); (err == nil) != ok {
					b.Fatal(err)
				}
			}
		}).AllocedBytesPerOp()
	}
	_, err := ParseMountinfo([]byte(bad))
	if want := fmt.Sprintf("line %d: ", strings.Count(bad, "\n")); err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "missing - separator") {
		t.Fatalf("error %v, want one from %q on the missing separator", err, want)
	}
	if read, refused := parseBytes([]byte(good), true), parseBytes([]byte(bad), false); refused > read+64<<10 {
		t.Errorf("refused in %d bytes allocated; %d to read the table without its bad line", refused, read)
	}
}
