package capture

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// unpack unpacks an archive made by Archive into dir for the tests'
// replays, as `tar -xzpf FILE -C DIR` (what capture's usage tells a user
// to run) does as root: modes with their setuid bits, and owners when run
// as root (the mount binaries' owner is a fact). Names that would leave
// dir, entries below or over a symlink the archive made, and anything but
// directories, regular files and symlinks, are refused.
func unpack(r io.Reader, dir string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		if !fs.ValidPath(name) || name == "." {
			return fmt.Errorf("extract: refusing entry %q", h.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		if err := noSymlinkAbove(dir, name); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		mode := fs.FileMode(h.Mode & 0o777)
		if h.Mode&0o4000 != 0 {
			mode |= fs.ModeSetuid
		}
		if h.Mode&0o2000 != 0 {
			mode |= fs.ModeSetgid
		}
		if h.Mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			// MkdirAll takes a symlink to a directory for the directory,
			// and the mode applied at the end would follow it out of dir.
			if fi, err := os.Lstat(target); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return fmt.Errorf("extract: refusing directory %q: the archive made a symlink there", h.Name)
			}
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			// Applied last: a read-only directory must be filled first.
			dirs = append(dirs, dirMode{target, mode})
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := chown(target, h); err != nil {
				return err
			}
			// After chown, which clears the setuid bits.
			if err := os.Chmod(target, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
			if err := chown(target, h); err != nil {
				return err
			}
		default:
			return fmt.Errorf("extract: %s: unsupported entry type %q", h.Name, h.Typeflag)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			return err
		}
	}
	return nil
}

func chown(p string, h *tar.Header) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := os.Lchown(p, h.Uid, h.Gid); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	return nil
}

// noSymlinkAbove refuses an entry below a symlink the archive made: writing
// through it could leave dir.
func noSymlinkAbove(dir, name string) error {
	p := dir
	parts := strings.Split(name, "/")
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("extract: refusing %q: it is below a symlink", name)
		}
	}
	return nil
}

// TestUnpackRefuses: names that leave the directory, and writing through
// a symlink, are refused.
func TestUnpackRefuses(t *testing.T) {
	// outside is a directory next to the one extracted into, whose mode a
	// directory entry over a symlink to it would change.
	outside := t.TempDir()
	if err := os.Chmod(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, entries := range map[string][]tar.Header{
		"dot-dot": {{Name: "../x", Typeflag: tar.TypeReg}},
		"dir over a link": {{Name: "a", Typeflag: tar.TypeSymlink, Linkname: outside},
			{Name: "a", Typeflag: tar.TypeDir, Mode: 0o700}},
		"absolute":       {{Name: "/etc/x", Typeflag: tar.TypeReg}},
		"through a link": {{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}, {Name: "a/x", Typeflag: tar.TypeReg}},
		"device":         {{Name: "dev/null", Typeflag: tar.TypeChar}},
	} {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for _, h := range entries {
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatal(err)
			}
		}
		tw.Close()
		zw.Close()
		dir := t.TempDir()
		if err := unpack(&buf, dir); err == nil {
			t.Errorf("%s: extracted", name)
		}
		if _, err := os.Stat(filepath.Join(dir, "..", "x")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: wrote outside the directory", name)
		}
		if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s: the directory outside is now %v (%v), want 0755", name, fi.Mode(), err)
		}
	}
}
