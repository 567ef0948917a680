package system_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// trees are the two ways a Tree resolves paths: openat2 in the kernel, and
// the walk in user space that kernels without openat2 get.
var trees = []struct {
	name string
	new  func(dir string) *system.Tree
}{
	{"openat2", system.NewTree},
	{"walk", func(dir string) *system.Tree { return system.WalkOnly(system.NewTree(dir)) }},
}

// TestTreeStaysInRoot: every read of a Tree resolves symlinks inside its
// root, as the node would: absolute links, links climbing
// with "..", links to directories on the way.
func TestTreeStaysInRoot(t *testing.T) {
	for _, tr := range trees {
		t.Run(tr.name, func(t *testing.T) { testTreeStaysInRoot(t, tr.new) })
	}
}

func testTreeStaysInRoot(t *testing.T, newTree func(string) *system.Tree) {
	out := hosttest.Dir(t, map[string]string{"secret": "outside", "dir/f": "outside"})
	root := t.TempDir()
	up := strings.Repeat("../", 20)
	hosttest.AddFiles(t, root, map[string]string{
		"secret":              "inside",
		"dir/f":               "inside",
		"abs":                 "->" + out + "/secret",
		"rel":                 "->" + up + strings.TrimPrefix(out, "/") + "/secret",
		"absdir":              "->" + out + "/dir",
		"rootabs":             "->/secret",
		"climb":               "->" + up + "secret",
		"proc/self/mountinfo": "1 0 0:1 / / rw - ext4 /dev/sda rw\n",
	})
	tree := newTree(root)
	for _, p := range []string{"/abs", "/rel", "/absdir/f"} {
		if b, err := tree.ReadFile(p, system.LimitValue); err == nil {
			t.Errorf("ReadFile(%s) = %q: read outside the root", p, b)
		}
		if _, err := tree.Stat(p); err == nil {
			t.Errorf("Stat(%s) found a file outside the root", p)
		}
		if _, err := tree.FSType(p); err == nil {
			t.Errorf("FSType(%s) found a file outside the root", p)
		}
	}
	for _, p := range []string{"/rootabs", "/climb"} {
		if b, err := tree.ReadFile(p, system.LimitValue); err != nil || string(b) != "inside" {
			t.Errorf("ReadFile(%s) = %q, %v: want the root's /secret", p, b, err)
		}
	}
	if _, err := tree.ReadDir("/absdir"); err == nil {
		t.Error("ReadDir(/absdir) listed a directory outside the root")
	}
	if fi, err := tree.Lstat("/abs"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(/abs) = %v, %v: want the link", fi, err)
	}
	if l, err := tree.Readlink("/abs"); err != nil || l != out+"/secret" {
		t.Errorf("Readlink(/abs) = %q, %v", l, err)
	}
	if _, err := tree.Readlink("/secret"); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Readlink of a file: %v, want EINVAL", err)
	}
	entries, err := tree.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "abs" {
			continue
		}
		if fi, err := e.Info(); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Info of /abs = %v, %v: want the link", fi, err)
		}
	}
}

// TestReadLimits: a read refuses what is not a regular file without
// blocking, and a file larger than its limit, naming path and limit.
func TestReadLimits(t *testing.T) {
	for _, tr := range trees {
		t.Run(tr.name, func(t *testing.T) { testReadLimits(t, tr.new) })
	}
}

func testReadLimits(t *testing.T, newTree func(string) *system.Tree) {
	root := hosttest.Dir(t, map[string]string{"big": strings.Repeat("x", 5000), "ok": "1234"})
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := newTree(root)
	done := make(chan error, 1)
	go func() { _, err := tree.ReadFile("/fifo", system.LimitValue); done <- err }()
	select {
	case err := <-done:
		if err == nil || err.Error() != "/fifo: not a regular file (a named pipe)" {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
	if _, err := tree.ReadFile("/big", system.LimitValue); err == nil || err.Error() != "/big: more than the 4096-byte limit for this file" {
		t.Errorf("big: %v", err)
	}
	if b, err := tree.ReadFile("/ok", 4); err != nil || string(b) != "1234" {
		t.Errorf("a file of exactly its limit: %q, %v", b, err)
	}
	if _, err := tree.ReadFile("/ok", 3); err == nil {
		t.Error("a file one byte over its limit was read")
	}
	for _, p := range []string{"/dev/zero", "/dev/null"} {
		if _, err := (system.Linux{}).ReadFile(p, system.LimitConfig); err == nil || !strings.Contains(err.Error(), "not a regular file (a character device)") {
			t.Errorf("Linux.ReadFile(%s): %v", p, err)
		}
	}
	// /proc files say size 0: read up to the limit all the same.
	if b, err := (system.Linux{}).ReadFile("/proc/self/mountinfo", system.LimitTable); err != nil || len(b) == 0 {
		t.Errorf("/proc/self/mountinfo: %d bytes, %v", len(b), err)
	}
	if _, err := (system.Linux{}).ReadFile("/proc/self/mountinfo", 10); err == nil {
		t.Error("/proc/self/mountinfo read past a 10-byte limit")
	}
}

// TestWalkAsOpenat2: the walk in user space answers every lookup as
// openat2 with RESOLVE_IN_ROOT does: the same file or the same errno, for
// links relative and absolute, chains, loops, ".." at the root, a file
// used as a directory, and links as the last component (followed by
// ReadFile and Stat, not by Lstat and Readlink).
func TestWalkAsOpenat2(t *testing.T) {
	root := hosttest.Dir(t, map[string]string{
		"secret":     "root's secret",
		"dir/f":      "dir's f",
		"dir/sub/g":  "sub's g",
		"dir/up":     "->../../../../secret",
		"dir/sib":    "->sub/g",
		"dir/subabs": "->/dir/sub",
		"chain1":     "->chain2",
		"chain2":     "->dir/sib",
		"loop":       "->loop",
		"dangling":   "->/nowhere",
		"todir":      "->dir",
	})
	kernel, walk := system.NewTree(root), system.WalkOnly(system.NewTree(root))
	if _, err := kernel.ReadFile("/secret", system.LimitValue); errors.Is(err, unix.ENOSYS) {
		t.Fatalf("openat2 is not there to compare with: %v", err)
	}
	paths := []string{
		"/", ".", "..", "/../../secret", "secret", "/dir/f", "/dir/../secret", "/dir/up",
		"/dir/sib", "/dir/subabs/g", "/dir/subabs/../f", "/chain1", "/loop", "/loop/x",
		"/dangling", "/todir/sub/../f", "/secret/x", "/nothing", "/dir/sub/../../dir/./f",
		"/todir", "/dir/subabs",
	}
	type answer struct {
		data, link string
		mode       fs.FileMode
		err        string
	}
	ask := func(tree *system.Tree, p string) [4]answer {
		var a [4]answer
		b, err := tree.ReadFile(p, system.LimitValue)
		a[0] = answer{data: string(b), err: errno(err)}
		if fi, err := tree.Stat(p); err != nil {
			a[1].err = errno(err)
		} else {
			a[1].mode = fi.Mode()
		}
		if fi, err := tree.Lstat(p); err != nil {
			a[2].err = errno(err)
		} else {
			a[2].mode = fi.Mode()
		}
		l, err := tree.Readlink(p)
		a[3] = answer{link: l, err: errno(err)}
		return a
	}
	for _, p := range paths {
		want, got := ask(kernel, p), ask(walk, p)
		for i, op := range []string{"ReadFile", "Stat", "Lstat", "Readlink"} {
			if want[i] != got[i] {
				t.Errorf("%s(%s): walk %+v, openat2 %+v", op, p, got[i], want[i])
			}
		}
	}
	entries, err := walk.ReadDir("/dir/subabs")
	if err != nil || len(entries) != 1 || entries[0].Name() != "g" {
		t.Errorf("walk: ReadDir(/dir/subabs) = %v, %v", entries, err)
	}
}

// errno is err's errno, or its text when it has none (a too-large or
// not-regular file).
func errno(err error) string {
	var e unix.Errno
	if errors.As(err, &e) {
		return e.Error()
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// TestRunOutputLimit: a command's output past LimitOutput is an error,
// and the command is stopped.
func TestRunOutputLimit(t *testing.T) {
	if _, err := os.Stat("/usr/bin/yes"); err != nil {
		t.Skip("no /usr/bin/yes")
	}
	start := time.Now()
	_, _, err := (system.Linux{}).Run(context.Background(), []string{"/usr/bin/yes"}, nil, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "longer than the") {
		t.Errorf("yes: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s", d)
	}
}
