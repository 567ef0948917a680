package system_test

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

func TestResolve(t *testing.T) {
	tr := hosttest.Tree(t, map[string]string{
		"sys/devices/virtual/dmi/id/product_uuid": "x",
		"sys/class/dmi/id":                        "->../../devices/virtual/dmi/id",
		"abs/id":                                  "->/sys/devices/virtual/dmi/id",
		"dots/id":                                 "->.//./../sys/./devices//virtual/dmi/./id/",
		"loop/a":                                  "->b",
		"loop/b":                                  "->a",
	})
	for in, want := range map[string]string{
		"/sys/class/dmi/id/product_uuid":           "/sys/devices/virtual/dmi/id/product_uuid",
		"/abs/id/product_uuid":                     "/sys/devices/virtual/dmi/id/product_uuid",
		"/dots/id/product_uuid":                    "/sys/devices/virtual/dmi/id/product_uuid",
		"/sys/devices/virtual/dmi/id/product_uuid": "/sys/devices/virtual/dmi/id/product_uuid",
		"/sys/class/../class/dmi/id/product_uuid":  "/sys/devices/virtual/dmi/id/product_uuid",
		"/sys/./class//dmi/id/./product_uuid":      "/sys/devices/virtual/dmi/id/product_uuid",
	} {
		got, err := system.Resolve(tr, in)
		if err != nil || got != want {
			t.Errorf("Resolve(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := system.Resolve(tr, "/loop/a"); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Resolve of a link loop: %v, want ELOOP", err)
	}
}

func TestUnder(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a", "/", true},
		{"/", "/", true},
		{"/a", "/a/b", false},
	} {
		if got := system.Under(c.p, c.dir); got != c.want {
			t.Errorf("Under(%q, %q) = %v, want %v", c.p, c.dir, got, c.want)
		}
	}
}

// linkSystem is a host of symlinks and directories only, in memory: a
// resolution over it costs what the resolver does, not what a disk does.
type linkSystem struct {
	system.System // nil: only Lstat and Readlink are asked
	links         map[string]string
	lstats        int
}

type dirInfo struct{ mode fs.FileMode }

func (d dirInfo) Name() string       { return "" }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() fs.FileMode  { return d.mode }
func (d dirInfo) ModTime() time.Time { return time.Time{} }
func (d dirInfo) IsDir() bool        { return d.mode.IsDir() }
func (d dirInfo) Sys() any           { return nil }

func (s *linkSystem) Lstat(p string) (fs.FileInfo, error) {
	s.lstats++
	if _, ok := s.links[p]; ok {
		return dirInfo{fs.ModeSymlink}, nil
	}
	return dirInfo{fs.ModeDir}, nil
}

func (s *linkSystem) Readlink(p string) (string, error) { return s.links[p], nil }

// paddedLink is a host whose /l is a link to /d/target with n "./" after
// /d/: padding after a name, where removing it from a path rebuilds the path.
func paddedLink(n int) *linkSystem {
	return &linkSystem{links: map[string]string{"/l": "/d/" + strings.Repeat("./", n) + "target"}}
}

// deepPath is /d/d/.../d, n names deep.
func deepPath(n int) string { return strings.Repeat("/d", n) }

// TestResolveLinear fails when resolving costs more than linear in its
// input, counted in allocations and in questions to the System (never in
// time): the "." names of a link's text are dropped in one pass, not one
// new string each, and every prefix of a deep path is asked about once.
// (That the table of what was seen is a map, not a list scanned per name,
// BenchmarkResolve's deep-path shows.)
func TestResolveLinear(t *testing.T) {
	allocs := func(sys *linkSystem, p string) float64 {
		return testing.AllocsPerRun(20, func() {
			if got, err := system.Resolve(sys, p); err != nil || !strings.HasSuffix(got, "/target") && !strings.HasSuffix(got, "/d") {
				t.Fatalf("Resolve(%.40s...) = %q, %v", p, got, err)
			}
		})
	}
	small, large := allocs(paddedLink(10), "/l"), allocs(paddedLink(10_000), "/l")
	if large > small {
		t.Errorf("a link padded with 10000 \"./\" takes %v allocations, with 10: %v; want no more", large, small)
	}

	sys := &linkSystem{}
	const depth = 10_000
	if _, err := system.Resolve(sys, deepPath(depth)); err != nil {
		t.Fatal(err)
	}
	if sys.lstats != depth {
		t.Errorf("a path %d names deep took %d Lstat calls, want %d", depth, sys.lstats, depth)
	}
}

// BenchmarkResolve resolves a link padded with many "./", and a path as
// many names deep as the kernel's PATH_MAX (4096 bytes) allows. Each name
// of a path costs one lookup of its prefix, in the table of what was seen
// and in the System, as a kernel walk does: what the resolver adds per name
// is constant.
func BenchmarkResolve(b *testing.B) {
	padded, deep := paddedLink(100_000), deepPath(2048)
	b.Run("padded-link", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := system.Resolve(padded, "/l"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("deep-path", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := system.Resolve(&linkSystem{}, deep); err != nil {
				b.Fatal(err)
			}
		}
	})
}
