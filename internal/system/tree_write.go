package system

// Writes to a fake tree. Every change of a Tree, and every change a test
// makes to one, goes through an os.Root opened on the tree's directory: a
// symlink met on the way, absolute or climbing out with "..", is an error,
// never a change on the machine that runs the tree. (Reads resolve such a
// link inside the root, as the node would; rooted.go. A write
// refuses it instead: what it would change on the node is not worth the
// risk of changing it here.)

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// TreeFiles changes the files below a directory, never outside it. Paths
// are node paths: "/etc/hosts" is the file etc/hosts below the directory.
// Errors are *fs.PathError values naming the node path.
type TreeFiles struct {
	root *os.Root
}

func OpenTreeFiles(dir string) (*TreeFiles, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &TreeFiles{root: r}, nil
}

func (f *TreeFiles) Close() error { return f.root.Close() }

// Files returns the writer of the tree's files, opened once; a test uses
// it to change a tree the way something other than the program would (a
// fixture, a command it models): such changes are not recorded in Changes.
func (t *Tree) Files() (*TreeFiles, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.files == nil {
		w, err := OpenTreeFiles(t.Root)
		if err != nil {
			return nil, err
		}
		t.files = w
	}
	return t.files, nil
}

// nodePathErr names node path p in err, an error of os.Root (which names the
// relative path it was given).
func nodePathErr(err error, p string) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		pe.Path = NodePath(p)
	}
	return err
}

// WriteFile replaces the file at p atomically: a temporary file in the same
// directory, renamed over p. A symlink at p is replaced, not followed.
func (f *TreeFiles) WriteFile(p string, data []byte, perm fs.FileMode) error {
	return f.writeFile(p, data, perm, nil)
}

// writeFile is WriteFile; beforeRename, when set, is asked before the
// rename and its error is returned instead (Tree.Fail).
func (f *TreeFiles) writeFile(p string, data []byte, perm fs.FileMode, beforeRename func() error) error {
	rel := relPath(p)
	dir, base := path.Split(rel)
	var tmp string
	var file *os.File
	for range 100 {
		tmp = fmt.Sprintf("%s.%s.tmp-%012x", dir, base, rand.Uint64N(1<<48))
		var err error
		file, err = f.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nodePathErr(err, p)
		}
		break
	}
	if file == nil {
		return &fs.PathError{Op: "open", Path: NodePath(p), Err: unix.EEXIST}
	}
	_, werr := file.Write(data)
	// Chmod of the open file: the name could have been swapped since.
	merr := file.Chmod(perm)
	cerr := file.Close()
	err := errors.Join(werr, merr, cerr)
	if err == nil && beforeRename != nil {
		err = beforeRename()
	}
	if err == nil {
		err = f.root.Rename(tmp, rel)
	}
	if err != nil {
		f.root.Remove(tmp)
		return nodePathErr(err, p)
	}
	return nil
}

// WriteInPlace rewrites the regular file at p (created if missing) in
// place, following a symlink at p inside the root: a bind-mounted file
// cannot be renamed over. Anything but a regular file is refused before it
// is opened to write.
func (f *TreeFiles) WriteInPlace(p string, data []byte) error {
	rel := relPath(p)
	if fi, err := f.root.Stat(rel); err == nil && !fi.Mode().IsRegular() {
		return &NotRegularError{Path: NodePath(p), Type: fi.Mode().Type().String()}
	}
	file, err := f.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|unix.O_NONBLOCK|unix.O_NOCTTY, 0o644)
	if err != nil {
		return nodePathErr(err, p)
	}
	fi, err := file.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &NotRegularError{Path: NodePath(p), Type: fi.Mode().Type().String()}
	}
	if err == nil {
		err = file.Truncate(0)
	}
	if err == nil {
		_, err = file.Write(data)
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	return nodePathErr(err, p)
}

func (f *TreeFiles) MkdirAll(p string, perm fs.FileMode) error {
	return nodePathErr(f.root.MkdirAll(relPath(p), perm), p)
}

func (f *TreeFiles) Remove(p string) error {
	return nodePathErr(f.root.Remove(relPath(p)), p)
}

func (f *TreeFiles) RemoveAll(p string) error {
	return nodePathErr(f.root.RemoveAll(relPath(p)), p)
}

// removeContents removes everything below directory p, keeping p.
func (f *TreeFiles) removeContents(p string) error {
	d, err := f.root.Open(relPath(p))
	if err != nil {
		return nodePathErr(err, p)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nodePathErr(err, p)
	}
	for _, n := range names {
		if err := f.RemoveAll(path.Join("/", p, n)); err != nil {
			return err
		}
	}
	return nil
}

// Symlink makes p a symlink to target (any text: it is not followed).
func (f *TreeFiles) Symlink(target, p string) error {
	return nodePathErr(f.root.Symlink(target, relPath(p)), p)
}

// Chmod changes the mode of p, following a symlink at p inside the root;
// fs.ModeSetuid, ModeSetgid and ModeSticky set those bits.
func (f *TreeFiles) Chmod(p string, mode fs.FileMode) error {
	return nodePathErr(f.root.Chmod(relPath(p), mode), p)
}

// Chown changes the owner of p, following a symlink at p inside the root.
func (f *TreeFiles) Chown(p string, uid, gid int) error {
	return nodePathErr(f.root.Chown(relPath(p), uid, gid), p)
}

// Lchown changes the owner of p itself, a symlink or not.
func (f *TreeFiles) Lchown(p string, uid, gid int) error {
	return nodePathErr(f.root.Lchown(relPath(p), uid, gid), p)
}

// Stat is stat(2) of p, following symlinks inside the root only.
func (f *TreeFiles) Stat(p string) (fs.FileInfo, error) {
	fi, err := f.root.Stat(relPath(p))
	return fi, nodePathErr(err, p)
}

// Rename renames oldp to newp, as rename(2): a symlink at either is renamed
// or replaced, not followed.
func (f *TreeFiles) Rename(oldp, newp string) error {
	return nodePathErr(f.root.Rename(relPath(oldp), relPath(newp)), newp)
}

// Mkfifo makes a named pipe at p, in the directory p names resolved
// inside the root (tests lay out hostile hosts with it).
func (f *TreeFiles) Mkfifo(p string, perm uint32) error {
	dir, base := path.Split(relPath(p))
	if dir == "" {
		dir = "."
	}
	d, err := f.root.Open(dir)
	if err != nil {
		return nodePathErr(err, p)
	}
	defer d.Close()
	if err := unix.Mkfifoat(int(d.Fd()), base, perm); err != nil {
		return &fs.PathError{Op: "mkfifo", Path: NodePath(p), Err: err}
	}
	return nil
}
