package hosttest

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// Golden compares got with the file at path, or with -update writes got
// there. A difference is printed -want +got.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

// CopyScenario copies a fake host kept in git (testdata/hosts/NAME/root)
// to dst (which may exist) as a fresh clone would hold it, whatever the
// working tree's modes: files 0644, or 0755 when executable, directories
// 0755, symlinks as links. Then it applies root/.host/modes, lines "PATH
// OCTAL-MODE [UID:GID]", for what git cannot store (setuid bits, 0600
// keys, owners; owners need root). Every write goes through dst's root
// (system.TreeFiles).
func CopyScenario(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	w, err := system.OpenTreeFiles(dst)
	if err != nil {
		return err
	}
	defer w.Close()
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := w.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return w.Chmod(target, 0o755) // whatever the umask
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return w.Symlink(link, target)
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			mode := fs.FileMode(0o644)
			if info.Mode()&0o100 != 0 {
				mode = 0o755
			}
			return w.WriteFile(target, b, mode)
		}
		return fmt.Errorf("%s: cannot copy %s", p, info.Mode().Type())
	})
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dst, system.ProbeDir, "modes"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func(err error) error { return fmt.Errorf("%s/modes: line %d: %q: %w", system.ProbeDir, i+1, line, err) }
		if len(f) < 2 || len(f) > 3 {
			return bad(errors.New("want PATH OCTAL-MODE [UID:GID]"))
		}
		mode, err := strconv.ParseUint(f[1], 8, 32)
		if err != nil || mode > 0o7777 {
			return bad(errors.New("bad mode"))
		}
		p := path.Clean("/" + f[0])
		if len(f) == 3 {
			u, g, _ := strings.Cut(f[2], ":")
			uid, err1 := strconv.Atoi(u)
			gid, err2 := strconv.Atoi(g)
			if err := errors.Join(err1, err2); err != nil {
				return bad(err)
			}
			if err := w.Lchown(p, uid, gid); err != nil {
				return bad(err)
			}
		}
		m := fs.FileMode(mode & 0o777)
		for bit, special := range map[uint64]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
			if mode&bit != 0 {
				m |= special
			}
		}
		if err := w.Chmod(p, m); err != nil {
			return bad(err)
		}
	}
	return nil
}

// WriteFiles lays out a small host below dir, for tests: each entry is a
// file with that content, a directory when its path ends in "/", or a
// symlink when its content is "->TARGET". Every file is written through
// the root (system.TreeFiles): a symlink laid out earlier never leads a
// write out of dir.
func WriteFiles(dir string, files map[string]string) error {
	w, err := system.OpenTreeFiles(dir)
	if err != nil {
		return err
	}
	defer w.Close()
	for p, content := range files {
		if strings.HasSuffix(p, "/") {
			if err := w.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := w.MkdirAll(path.Dir(path.Clean("/"+p)), 0o755); err != nil {
			return err
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := w.Symlink(target, p); err != nil {
				return err
			}
			continue
		}
		if err := w.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Files is tree.Files for a test: the writer every change a test makes to
// a tree goes through, so that a symlink in the tree never leads it out.
func Files(t testing.TB, tree *system.Tree) *system.TreeFiles {
	t.Helper()
	w, err := tree.Files()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// AddFiles is WriteFiles for a test: it fails t on error.
func AddFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	if err := WriteFiles(dir, files); err != nil {
		t.Fatal(err)
	}
}

// Dir lays out files (as WriteFiles does) in a new temporary directory and
// returns that directory.
func Dir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	AddFiles(t, dir, files)
	return dir
}

// Tree lays out files (as WriteFiles does) in a temporary directory and
// returns the fake host rooted there.
func Tree(t testing.TB, files map[string]string) *system.Tree {
	t.Helper()
	return system.NewTree(Dir(t, files))
}

// HostsDir is the directory of the fake hosts kept in git, testdata/hosts
// at the module's root, relative to the working directory (a test's is its
// package's directory). It panics when no go.mod is above: a test run
// outside the module has no fake hosts to use.
func HostsDir() string {
	up := "."
	for range 8 {
		if _, err := os.Stat(filepath.Join(up, "go.mod")); err == nil {
			return filepath.Join(up, "testdata", "hosts")
		}
		up = filepath.Join(up, "..")
	}
	panic("hosttest: no go.mod above the working directory")
}

// Hosts returns the names of the fake hosts kept in git, sorted: the
// directories of testdata/hosts.
func Hosts(t testing.TB) []string {
	t.Helper()
	return names(t, HostsDir(), fs.DirEntry.IsDir)
}

// DirNames returns the names of dir's entries, sorted.
func DirNames(t testing.TB, dir string) []string {
	t.Helper()
	return names(t, dir, func(fs.DirEntry) bool { return true })
}

// names lists dir (os.ReadDir: sorted), keeping the entries keep accepts;
// a directory that cannot be read fails t.
func names(t testing.TB, dir string, keep func(fs.DirEntry) bool) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if keep(e) {
			out = append(out, e.Name())
		}
	}
	return out
}

// Host copies the fake host NAME of testdata/hosts to a temporary
// directory as a fresh clone would hold it (CopyScenario), and returns
// that directory.
func Host(t testing.TB, name string) string {
	t.Helper()
	dst := t.TempDir()
	if err := CopyScenario(filepath.Join(HostsDir(), name, "root"), dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// Mounts parses mountinfo lines with the one parser (system.ParseMountinfo).
func Mounts(t testing.TB, lines ...string) []*mountinfo.Info {
	t.Helper()
	mi, err := system.ParseMountinfo([]byte(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return mi
}

// ErrString is err's text, or "" for no error: what a table case's wantErr
// is compared with.
func ErrString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Result checks a table case's outcome: the error's text against wantErr
// ("" for none), and got against want (-want +got; an empty slice or map
// equals a nil one). what names the call, as "Plan".
func Result[T any](t testing.TB, what string, got T, err error, want T, wantErr string) {
	t.Helper()
	if ErrString(err) != wantErr {
		t.Errorf("%s error = %q, want %q", what, ErrString(err), wantErr)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// Snapshot describes every file below dir, keyed by its path from dir
// ("/" is dir itself): type and mode, owner, and a regular file's
// content hash or a link's target. Two snapshots are equal when nothing
// below dir was created, removed, rewritten, chmod'ed or chown'ed.
func Snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			desc += fmt.Sprintf(" %d:%d", st.Uid, st.Gid)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + l
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[filepath.Join("/", rel)] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
