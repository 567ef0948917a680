package system

import (
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
