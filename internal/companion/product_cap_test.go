package companion

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// productNode is a node whose /kind holds n product files of 4 KiB (the
// read limit of each).
func productNode(t testing.TB, n int) *system.Tree {
	files := map[string]string{"proc/self/mountinfo": "1 0 0:1 / / rw - ext4 /dev/sda rw\n"}
	for i := range n {
		files[fmt.Sprintf("kind/product_%05d", i)] = strings.Repeat("x", system.LimitValue)
	}
	dir := hosttest.Dir(t, files)
	return system.NewTree(dir)
}

// detectAllocs is what DetectProductFiles allocates on tree, and its error.
func detectAllocs(tree *system.Tree) (int64, error) {
	var err error
	res := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			_, err = DetectProductFiles(tree, "/run/bundle")
		}
	})
	return res.AllocedBytesPerOp(), err
}

// TestProductFilesCapped: at the cap, the product files are read, and
// what the hook holds is about their size; past it, the hook fails
// naming /kind without reading the rest (2000 files of 4 KiB
// were 8 MB held, and any number more).
func TestProductFilesCapped(t *testing.T) {
	held := int64(MaxProductFiles * system.LimitValue)
	n, err := detectAllocs(productNode(t, MaxProductFiles))
	if err != nil {
		t.Fatalf("%d product files: %v", MaxProductFiles, err)
	}
	if n > 4*held+(256<<10) {
		t.Errorf("%d product files of %d bytes: %d bytes allocated; want at most %d", MaxProductFiles, system.LimitValue, n, 4*held+(256<<10))
	}
	n, err = detectAllocs(productNode(t, 2000))
	if err == nil || !strings.Contains(err.Error(), "/kind holds more than") {
		t.Errorf("2000 product files: error %v; want one naming /kind", err)
	}
	if n > 4*held+(1<<20) {
		t.Errorf("2000 product files: %d bytes allocated; want at most %d", n, 4*held+(1<<20))
	}
}

// BenchmarkProductFiles detects 160 product files (ten times the cap,
// which kind's nodes, with two, never near).
func BenchmarkProductFiles(b *testing.B) {
	tree := productNode(b, 10*MaxProductFiles)
	b.ReportAllocs()
	for b.Loop() {
		DetectProductFiles(tree, "/run/bundle")
	}
}
