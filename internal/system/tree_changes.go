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
	if err := t.fail("write", p); err != nil {
		return err
	}
	if t.isMountpoint(p) {
		// rename(2) over a mount point fails; the kernel says EBUSY.
		return &fs.PathError{Op: "rename", Path: p, Err: unix.EBUSY}
	}
	w, err := t.Files()
	if err != nil {
		return err
	}
	if err := w.writeFile(p, data, perm, func() error { return t.fail("rename", p) }); err != nil {
		return err
	}
	t.record("write %s %#o %s", p, perm.Perm(), describe(data))
	return nil
}

func (t *Tree) WriteFileInPlace(p string, data []byte) error {
	if err := t.fail("write-in-place", p); err != nil {
		return err
	}
	w, err := t.Files()
	if err != nil {
		return err
	}
	if err := w.WriteInPlace(t.resolve(p), data); err != nil {
		return err
	}
	t.record("write-in-place %s %s", p, describe(data))
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
	if err := t.fail("remove", p); err != nil {
		return err
	}
	if t.isMountpoint(p) {
		return &fs.PathError{Op: "remove", Path: p, Err: unix.EBUSY}
	}
	w, err := t.Files()
	if err != nil {
		return err
	}
	t.mu.Lock()
	wasMount := t.unmounted[path.Clean(p)]
	t.mu.Unlock()
	if wasMount {
		if err := w.removeContents(p); err != nil {
			return err
		}
	}
	if err := w.Remove(p); err != nil {
		return err
	}
	t.record("remove %s", p)
	return nil
}

func (t *Tree) Symlink(target, p string) error {
	if err := t.fail("symlink", p); err != nil {
		return err
	}
	w, err := t.Files()
	if err != nil {
		return err
	}
	if err := w.Symlink(target, p); err != nil {
		return err
	}
	t.record("symlink %s -> %s", p, target)
	return nil
}

// Chown changes the owner when running as root; otherwise it is only
// recorded.
func (t *Tree) Chown(p string, uid, gid int) error {
	if err := t.fail("chown", p); err != nil {
		return err
	}
	w, err := t.Files()
	if err != nil {
		return err
	}
	if _, err := w.Stat(p); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		if err := w.Chown(p, uid, gid); err != nil {
			return err
		}
	}
	t.record("chown %s %d:%d", p, uid, gid)
	return nil
}

func (t *Tree) Chmod(p string, mode fs.FileMode) error {
	if err := t.fail("chmod", p); err != nil {
		return err
	}
	w, err := t.Files()
	if err != nil {
		return err
	}
	if err := w.Chmod(p, mode); err != nil {
		return err
	}
	t.record("chmod %s %s", p, mode)
	return nil
}

func (t *Tree) Sync() { t.record("sync") }
