package system_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// TestOpen: a file opened to read at offsets is found and checked as
// ReadFile finds and checks it (links resolve inside a Tree's root, only a
// regular file is opened, a FIFO without blocking); its limit is on the
// bytes read, not on its size, so a sparse file of 100 GB opens and
// costs the pages read. The same on a Tree, both ways it resolves, and on
// the machine.
func TestOpen(t *testing.T) {
	out := hosttest.Dir(t, map[string]string{"secret": "outside"})
	root := hosttest.Dir(t, map[string]string{
		"f":       "0123456789",
		"secret":  "inside",
		"abs":     "->" + out + "/secret",
		"rel":     "->" + strings.Repeat("../", 20) + strings.TrimPrefix(out, "/") + "/secret",
		"rootabs": "->/secret",
		"dir/x":   "",
	})
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(filepath.Join(root, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	const huge = 100 << 30
	if _, err := sparse.WriteAt([]byte("end"), huge-3); err != nil {
		t.Fatalf("a sparse file of 100 GB: %v", err)
	}
	sparse.Close()
	for _, tr := range trees {
		t.Run(tr.name, func(t *testing.T) { testOpen(t, tr.new(root), "") })
	}
	t.Run("Linux", func(t *testing.T) {
		// The machine's own links are followed: only the Tree's rules
		// differ, which the Tree cases cover.
		testOpen(t, system.Linux{}, root)
	})
}

func testOpen(t *testing.T, sys system.System, prefix string) {
	read := func(p string, limit int, off int64, n int) (string, error) {
		f, err := sys.Open(prefix+p, limit)
		if err != nil {
			return "", err
		}
		defer f.Close()
		buf := make([]byte, n)
		m, err := f.ReadAt(buf, off)
		return string(buf[:m]), err
	}
	if got, err := read("/f", 10, 2, 3); err != nil || got != "234" {
		t.Errorf("ReadAt(/f, 2, 3) = %q, %v", got, err)
	}
	if got, err := read("/f", 10, 8, 4); got != "89" || err != io.EOF {
		t.Errorf("ReadAt past the end = %q, %v; want the rest and io.EOF", got, err)
	}
	if got, err := read("/f", 3, 0, 4); got != "" || !strings.Contains(errString(err), "reading more than the 3-byte limit") {
		t.Errorf("a read past the limit = %q, %v; want nothing and an error naming the limit", got, err)
	}
	if prefix == "" {
		if got, err := read("/rootabs", 10, 0, 6); err != nil || got != "inside" {
			t.Errorf("/rootabs = %q, %v; want the root's /secret", got, err)
		}
		for _, p := range []string{"/abs", "/rel"} {
			if got, err := read(p, 10, 0, 7); err == nil {
				t.Errorf("%s = %q: read outside the root", p, got)
			}
		}
	}
	done := make(chan error, 1)
	go func() { _, err := sys.Open(prefix+"/fifo", 10); done <- err }()
	select {
	case err := <-done:
		var nr *system.NotRegularError
		if !errors.As(err, &nr) {
			t.Errorf("FIFO: %v, want not a regular file", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("opening a FIFO blocked")
	}
	if _, err := sys.Open(prefix+"/dir", 10); !strings.Contains(errString(err), "not a regular file (a directory)") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := sys.Open(prefix+"/missing", 10); !system.NotExist(err) {
		t.Errorf("a missing file: %v, want NotExist", err)
	}
	// 100 GB, of which 4 KiB is read: the limit is what is read.
	f, err := sys.Open(prefix+"/sparse", 8192)
	if err != nil {
		t.Fatalf("sparse: %v", err)
	}
	defer f.Close()
	if f.Size() != 100<<30 {
		t.Errorf("sparse: size %d", f.Size())
	}
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, f.Size()-4096); err != nil || string(buf[4093:]) != "end" {
		t.Errorf("sparse: its last page: %q, %v", buf[4093:], err)
	}
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Errorf("sparse: a second page under the limit: %v", err)
	}
	if _, err := f.ReadAt(buf[:1], 0); err == nil {
		t.Error("sparse: a byte past the limit was read")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
