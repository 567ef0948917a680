package system_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// escapeSetup lays out a tree whose /file, /dir and /proc are symlinks
// leaving it (kind "absolute" or "climbing") to a directory outside, and
// returns the tree and that directory.
func escapeSetup(t *testing.T, kind string) (*system.Tree, string) {
	t.Helper()
	out := hosttest.Dir(t, map[string]string{
		"target":         "outside",
		"dir/f":          "outside",
		"self/mountinfo": "1 0 0:1 / / rw - ext4 /dev/sda rw\n",
	})
	root := t.TempDir()
	link := func(p string) string {
		if kind == "absolute" {
			return "->" + out + "/" + p
		}
		return "->" + strings.Repeat("../", 20) + strings.TrimPrefix(out, "/") + "/" + p
	}
	hosttest.AddFiles(t, root, map[string]string{
		"file":    link("target"),
		"dir":     link("dir"),
		"proc":    link(""),
		"etc/ok/": "",
		// What a read of /proc/self/mountinfo finds: reads resolve the
		// link inside the root.
		strings.TrimPrefix(out, "/") + "/self/mountinfo": "1 0 0:1 / / rw - ext4 /dev/sda rw\n",
	})
	return system.NewTree(root), out
}

// TestTreeWritesStayInRoot: every change of a Tree made through a symlink
// that leaves the root, absolute or climbing with "..", fails and changes
// nothing outside the root. Before rooted writes, each
// of these wrote, chmod-ed, linked or removed the file outside.
func TestTreeWritesStayInRoot(t *testing.T) {
	ops := []struct {
		name string
		do   func(tree *system.Tree) error
	}{
		{"WriteFile through a directory link", func(tree *system.Tree) error { return tree.WriteFile("/dir/new", []byte("x"), 0o644) }},
		{"WriteFile over a file in a linked directory", func(tree *system.Tree) error { return tree.WriteFile("/dir/f", []byte("x"), 0o644) }},
		{"WriteFileInPlace of a file link", func(tree *system.Tree) error { return tree.WriteFileInPlace("/file", []byte("x")) }},
		{"WriteFileInPlace through a directory link", func(tree *system.Tree) error { return tree.WriteFileInPlace("/dir/f", []byte("x")) }},
		{"Chmod of a file link", func(tree *system.Tree) error { return tree.Chmod("/file", 0o600|fs.ModeSetuid) }},
		{"Chmod through a directory link", func(tree *system.Tree) error { return tree.Chmod("/dir/f", 0o600) }},
		{"Chown of a file link", func(tree *system.Tree) error { return tree.Chown("/file", 4242, 4242) }},
		{"Chown through a directory link", func(tree *system.Tree) error { return tree.Chown("/dir/f", 4242, 4242) }},
		{"MkdirAll through a directory link", func(tree *system.Tree) error { return tree.MkdirAll("/dir/new/sub", 0o755) }},
		{"Symlink through a directory link", func(tree *system.Tree) error { return tree.Symlink("/etc/passwd", "/dir/link") }},
		{"Remove through a directory link", func(tree *system.Tree) error { return tree.Remove("/dir/f") }},
		{"Mount (the mount table's writer)", func(tree *system.Tree) error { return tree.Mount("tmpfs", "/etc/ok", "tmpfs", 0, "") }},
		{"Unmount (the mount table's writer)", func(tree *system.Tree) error { return tree.Unmount("/", 0) }},
		// The writer tests lay out and change trees with.
		{"TreeFiles.WriteFile", func(tree *system.Tree) error { return hosttest.Files(t, tree).WriteFile("/dir/g", []byte("x"), 0o644) }},
		{"TreeFiles.WriteInPlace", func(tree *system.Tree) error { return hosttest.Files(t, tree).WriteInPlace("/file", []byte("x")) }},
		{"TreeFiles.Chmod", func(tree *system.Tree) error { return hosttest.Files(t, tree).Chmod("/file", 0o600) }},
		{"TreeFiles.Lchown", func(tree *system.Tree) error { return hosttest.Files(t, tree).Lchown("/dir/f", 4242, 4242) }},
		{"TreeFiles.RemoveAll", func(tree *system.Tree) error { return hosttest.Files(t, tree).RemoveAll("/dir/f") }},
		{"hosttest.WriteFiles", func(tree *system.Tree) error {
			return hosttest.WriteFiles(tree.Root, map[string]string{"dir/h": "x"})
		}},
	}
	for _, kind := range []string{"absolute", "climbing"} {
		for _, op := range ops {
			t.Run(kind+"/"+op.name, func(t *testing.T) {
				tree, out := escapeSetup(t, kind)
				before := hosttest.Snapshot(t, out)
				if err := op.do(tree); err == nil {
					t.Errorf("no error")
				}
				if diff := cmp.Diff(before, hosttest.Snapshot(t, out)); diff != "" {
					t.Errorf("changed the machine outside the tree (-before +after):\n%s", diff)
				}
				if got := tree.Changes(); len(got) != 0 {
					t.Errorf("a failed change was recorded: %q", got)
				}
			})
		}
	}
}

// TestTreeWritesInside: the rooted writes still do what they did inside
// the tree: atomic replace (a link at the path is replaced, not followed),
// in-place rewrite through a link that stays inside, modes with setuid.
func TestTreeWritesInside(t *testing.T) {
	root := hosttest.Dir(t, map[string]string{
		"etc/real":            "old",
		"etc/inlink":          "->real",
		"etc/replaced":        "->/etc/real",
		"proc/self/mountinfo": "1 0 0:1 / / rw - ext4 /dev/sda rw\n",
	})
	tree := system.NewTree(root)
	if err := tree.WriteFile("/etc/replaced", []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "etc/replaced")); err != nil || fi.Mode() != 0o600 {
		t.Errorf("WriteFile over a link: %v, %v; want a 0600 file", fi, err)
	}
	if err := tree.WriteFileInPlace("/etc/inlink", []byte("in place")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/real")); string(b) != "in place" {
		t.Errorf("in place through a link inside the root: %q", b)
	}
	if err := tree.Chmod("/etc/real", 0o755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(root, "etc/real")); fi.Mode() != 0o755|fs.ModeSetuid {
		t.Errorf("Chmod: mode %v", fi.Mode())
	}
	if err := tree.MkdirAll("/a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tree.Symlink("/anywhere", "/a/b/l"); err != nil {
		t.Fatal(err)
	}
	if err := tree.WriteFileInPlace("/a/b/l", []byte("x")); err == nil {
		t.Error("WriteFileInPlace through an absolute link: no error")
	}
	entries, _ := os.ReadDir(filepath.Join(root, "etc"))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
