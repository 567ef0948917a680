package system

// This file holds the Tree's changes: each is recorded as a line, and made
// below the tree's root through TreeFiles (tree_write.go).

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"

	"golang.org/x/sys/unix"
)

func (t *Tree) WriteFile(p string, data []byte, perm fs.FileMode) error {
	return t.change("write", p, func(w *TreeFiles) error {
		if t.isMountpoint(p) {
			// rename(2) over a mount point fails; the kernel says EBUSY.
			return &fs.PathError{Op: "rename", Path: p, Err: unix.EBUSY}
		}
		return w.writeFile(p, data, perm, func() error { return t.fail("rename", p) })
	}, "write %s %#o %s", p, perm.Perm(), describe(data))
}

func (t *Tree) WriteFileInPlace(p string, data []byte) error {
	return t.change("write-in-place", p, func(w *TreeFiles) error {
		return w.WriteInPlace(t.resolve(p), data)
	}, "write-in-place %s %s", p, describe(data))
}

// change is a change without special cases: the failure injected for op at
// p, then do on the tree's files, then the line recorded once do succeeded.
func (t *Tree) change(op, p string, do func(w *TreeFiles) error, format string, args ...any) error {
	if err := t.fail(op, p); err != nil {
		return err
	}
	w, err := t.Files()
	if err != nil {
		return err
	}
	if err := do(w); err != nil {
		return err
	}
	t.record(format, args...)
	return nil
}

// describe summarises file content for the change log: short text in full.
func describe(data []byte) string {
	if len(data) <= 120 {
		return strconv.Quote(string(data))
	}
	return fmt.Sprintf("(%d bytes)", len(data))
}

func (t *Tree) MkdirAll(p string, perm fs.FileMode) error {
	if err := t.fail("mkdir", p); err != nil {
		return err
	}
	if fi, err := t.Stat(p); err == nil && fi.IsDir() {
		return nil
	}
	w, err := t.Files()
	if err != nil {
		return err
	}
	if err := w.MkdirAll(p, perm); err != nil {
		return err
	}
	t.record("mkdir %s", p)
	return nil
}

func (t *Tree) Remove(p string) error {
	return t.change("remove", p, func(w *TreeFiles) error {
		if t.isMountpoint(p) {
			return &fs.PathError{Op: "remove", Path: p, Err: unix.EBUSY}
		}
		t.mu.Lock()
		wasMount := t.unmounted[path.Clean(p)]
		t.mu.Unlock()
		if wasMount {
			if err := w.removeContents(p); err != nil {
				return err
			}
		}
		return w.Remove(p)
	}, "remove %s", p)
}

func (t *Tree) Symlink(target, p string) error {
	return t.change("symlink", p, func(w *TreeFiles) error {
		return w.Symlink(target, p)
	}, "symlink %s -> %s", p, target)
}

// Chown changes the owner when running as root; otherwise it is only
// recorded.
func (t *Tree) Chown(p string, uid, gid int) error {
	return t.change("chown", p, func(w *TreeFiles) error {
		if _, err := w.Stat(p); err != nil || os.Geteuid() != 0 {
			return err
		}
		return w.Chown(p, uid, gid)
	}, "chown %s %d:%d", p, uid, gid)
}

func (t *Tree) Chmod(p string, mode fs.FileMode) error {
	return t.change("chmod", p, func(w *TreeFiles) error {
		return w.Chmod(p, mode)
	}, "chmod %s %s", p, mode)
}

func (t *Tree) Sync() { t.record("sync") }
