package capture

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// deepTree is a tree with files files in a directory depth levels deep;
// it returns the tree and the files' paths.
func deepTree(t testing.TB, depth, files int) (*system.Tree, []string) {
	dir := "/" + strings.Repeat("d/", depth)
	layout := map[string]string{"proc/self/mountinfo": "1 0 0:1 / / rw - ext4 /dev/sda rw\n"}
	var paths []string
	for i := range files {
		p := dir + "f" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		layout[p[1:]] = "x"
		paths = append(paths, p)
	}
	root := hosttest.Dir(t, layout)
	return system.NewTree(root), paths
}

// TestCaptureLookupsLinear: archiving files deep in a tree looks up each
// directory on the way once, not once for every file below it
// (capture was quadratic in the depth of the paths read). The old code
// made depth x files lookups here: 400 x 300 = 120k.
func TestCaptureLookupsLinear(t *testing.T) {
	const depth, files = 400, 300
	tree, paths := deepTree(t, depth, files)
	sys := &counting{Tree: tree}
	rec := NewRecorder(sys)
	for _, p := range paths {
		if _, err := rec.ReadFile(p, system.LimitValue); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Archive(io.Discard, rec, Options{Time: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if n, max := sys.lookups.Load(), int64(4*(depth+files)); n > max {
		t.Errorf("%d lookups to archive %d files %d directories deep; want at most %d", n, files, depth, max)
	}
}

// BenchmarkCaptureDeep archives 3000 files 400 directories deep (ten
// times the files of TestCaptureLookupsLinear).
func BenchmarkCaptureDeep(b *testing.B) {
	tree, paths := deepTree(b, 400, 3000)
	for b.Loop() {
		rec := NewRecorder(tree)
		for _, p := range paths {
			rec.ReadFile(p, system.LimitValue)
		}
		if _, err := Archive(io.Discard, rec, Options{Time: time.Unix(0, 0)}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRedactLinesAllocs: redacting a plan's text without any URL in it
// copies nothing; with one, the text once.
func TestRedactLinesAllocs(t *testing.T) {
	plain := strings.Repeat("  mkdir /sys/fs/cgroup/x/kubelet 0755\n", 100_000)
	if n := testing.AllocsPerRun(3, func() { RedactURLCredentials(plain) }); n != 0 {
		t.Errorf("%v allocations redacting text without URLs", n)
	}
	withURL := plain + "HTTP_PROXY=http://user:pass@proxy:3128\n"
	if got := RedactURLCredentials(withURL); !strings.HasSuffix(got, "HTTP_PROXY=http://REDACTED@proxy:3128\n") || len(got) != len(withURL)-len("user:pass")+len("REDACTED") {
		t.Errorf("redacted: ...%q", got[len(got)-60:])
	}
}

// hostsTree is a tree whose .host/hosts answers n addresses for one name,
// each twice.
func hostsTree(t testing.TB, n int) *system.Tree {
	var line strings.Builder
	line.WriteString("kind")
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
		line.WriteString(" " + a + " " + a)
	}
	root := hosttest.Dir(t, map[string]string{
		"proc/self/mountinfo": "1 0 0:1 / / rw - ext4 /dev/sda rw\n",
		".host/hosts":         line.String() + " ::1\n",
	})
	return system.NewTree(root)
}

// archiveLookups archives the answers of looking kind up for ip4 and ip.
func archiveLookups(t testing.TB, tree *system.Tree) []byte {
	rec := NewRecorder(tree)
	for _, network := range []string{"ip4", "ip"} {
		if _, err := rec.LookupIP(context.Background(), network, "kind"); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := Archive(&buf, rec, Options{Time: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestArchivedHostsDeduplicated: the archived answers hold each address
// once, in the order first answered, across networks.
func TestArchivedHostsDeduplicated(t *testing.T) {
	e := readArchive(t, archiveLookups(t, hostsTree(t, 3)))["/.host/hosts"]
	if got, want := string(e.data), "kind 10.0.0.0 10.0.0.1 10.0.0.2 ::1\n"; got != want {
		t.Errorf(".host/hosts = %q, want %q", got, want)
	}
}

// BenchmarkArchiveHosts archives 168k answers for one name, 84k for each
// network, within the 1 MiB cap of .host/hosts. Capture searched the list
// of addresses kept for each one: 5.6 s of CPU for a host of 80k
// addresses; one set now, 0.14 s.
func BenchmarkArchiveHosts(b *testing.B) {
	tree := hostsTree(b, 42_000)
	for b.Loop() {
		archiveLookups(b, tree)
	}
}

// filesBuilder is a builder of files files in a directory depth levels
// deep, its directories without entries of their own: write makes them.
func filesBuilder(depth, files int) *builder {
	b := &builder{entries: map[string]*entry{}, mtime: time.Unix(0, 0)}
	dir := strings.Repeat("/d", depth)
	for i := range files {
		p := fmt.Sprintf("%s/f%d", dir, i)
		b.entries[p] = &entry{hdr: tar.Header{Name: p[1:], Typeflag: tar.TypeReg, Mode: 0o644, Format: tar.FormatPAX}, data: []byte{}}
	}
	return b
}

// TestArchiveDirsLinear: writing an archive makes the directories an
// entry lacks looking up its ancestors only up to the first one known.
// It looked up every one, to the root, for every entry, each lookup a
// copy of the name: quadratic in the depth. Counted in allocations, what
// a file more costs in a directory 400 deep, against a budget of 100:
// the old code made one for each of the 400 ancestors.
func TestArchiveDirsLinear(t *testing.T) {
	const depth, files = 400, 100
	allocs := func(files int) float64 {
		b := filesBuilder(depth, files)
		return testing.AllocsPerRun(1, func() {
			if err := b.write(io.Discard); err != nil {
				t.Fatal(err)
			}
		})
	}
	if perFile := (allocs(2*files) - allocs(files)) / files; perFile > depth/4 {
		t.Errorf("%v allocations for each file more %d directories deep; want at most %d", perFile, depth, depth/4)
	}
	// Each directory once.
	var buf bytes.Buffer
	if err := filesBuilder(3, 2).write(&buf); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range readArchive(t, buf.Bytes()) {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"/d", "/d/d", "/d/d/d", "/d/d/d/f0", "/d/d/d/f1"}; !slices.Equal(names, want) {
		t.Errorf("archived %q, want %q", names, want)
	}
}
