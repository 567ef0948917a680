package capture

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/kind-entrypoint/entrypoint/internal/containerd"
	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/proxy"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// resolveDir adds the directories (and kept symlinks) leading to d and
// returns where d's content is in the archive.
func (b *builder) resolveDir(d string, hops int) (string, error) {
	d = system.NodePath(d)
	if d == "/" {
		return "/", nil
	}
	if r, ok := b.resolved[d]; ok && hops == 0 {
		return r, nil
	}
	r, err := b.resolveDirOnce(d, hops)
	if err == nil && hops == 0 {
		if b.resolved == nil {
			b.resolved = map[string]string{}
		}
		b.resolved[d] = r
	}
	return r, err
}

// resolveDirOnce is resolveDir of a clean d other than "/", not memoized.
func (b *builder) resolveDirOnce(d string, hops int) (string, error) {
	dir := system.Parent(d)
	parent, err := b.resolveDir(dir, hops)
	if err != nil {
		return "", err
	}
	// d itself when no link above it was followed: a deep path's every
	// ancestor is resolved, and a copy of each is quadratic in depth.
	cur := d
	if parent != dir {
		cur = path.Join(parent, path.Base(d))
	}
	fi, err := b.sys.Lstat(cur)
	if err != nil {
		return cur, nil // missing: what is under it is missing too
	}
	if fi.Mode()&fs.ModeSymlink != 0 && b.preserve[cur] && !system.Under(cur, "/proc") {
		target, err := b.sys.Readlink(cur)
		if err != nil {
			return "", err
		}
		b.put(cur, fi, nil, target)
		if target, err = follow(d, cur, target, hops+1); err != nil {
			return "", err
		}
		return b.resolveDir(target, hops+1)
	}
	if fi, err = b.sys.Stat(cur); err == nil && fi.IsDir() {
		b.put(cur, fi, nil, "")
	}
	return cur, nil
}

// follow is where the symlink at loc, holding target, leads, when it is
// hop number hops of the resolution of p: past system.MaxLinkHops, ELOOP.
func follow(p, loc, target string, hops int) (string, error) {
	if hops > system.MaxLinkHops {
		return "", &fs.PathError{Op: "capture", Path: p, Err: syscall.ELOOP}
	}
	if !path.IsAbs(target) {
		target = path.Join(path.Dir(loc), target)
	}
	return target, nil
}

// add archives node path p, read as a says (with that read's limit).
func (b *builder) add(p string, a Access, limit, hops int) error {
	p = system.NodePath(p)
	if p == "/" {
		return nil
	}
	dir, err := b.resolveDir(system.Parent(p), hops)
	if err != nil {
		return err
	}
	loc := path.Join(dir, path.Base(p))
	fi, err := b.sys.Lstat(loc)
	if err != nil {
		b.note(p, "absent (%s)", a)
		return nil
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if a&(Lstat|Link) != 0 && !system.Under(loc, "/proc") {
			target, err := b.sys.Readlink(loc)
			if err != nil {
				return err
			}
			b.put(loc, fi, nil, target)
			b.note(p, "symlink -> %s (%s)", target, a)
			if rest := a &^ (Lstat | Link); rest != 0 {
				// Also read through the link: archive where it leads.
				if target, err = follow(p, loc, target, hops+1); err != nil {
					return err
				}
				return b.add(target, rest, limit, hops+1)
			}
			return nil
		}
		if fi, err = b.sys.Stat(loc); err != nil {
			b.note(p, "absent: a dangling symlink (%s)", a)
			return nil
		}
	}
	data, what := []byte{}, ""
	switch {
	case fi.IsDir() && a&List == 0:
		what = fmt.Sprintf("directory (%s)", a)
	case fi.IsDir():
		b.put(loc, fi, nil, "")
		entries, err := b.sys.ReadDir(loc)
		if err != nil {
			return err
		}
		for _, e := range entries {
			child := path.Join(loc, e.Name())
			cfi, err := b.sys.Lstat(child)
			if err != nil {
				continue
			}
			target := ""
			if cfi.Mode()&fs.ModeSymlink != 0 {
				if target, err = b.sys.Readlink(child); err != nil {
					return err
				}
			}
			b.put(child, cfi, []byte{}, target)
		}
		b.note(p, "directory, its %d entries listed, their content not archived (%s)", len(entries), a)
		return nil
	case fi.Mode().IsRegular() && a&(Read|Pages) != 0 && etcdpeers.IsBackend(p):
		data, what = b.backend(p, a)
	case fi.Mode().IsRegular() && a&(Read|Pages) != 0:
		// A file read by pages other than etcd's database (none is
		// today) is archived whole, as far as its limit allows: a
		// replay may read any page, and archive/tar writes no sparse
		// file that could hold only the pages read.
		read, err := b.sys.ReadFile(loc, limit)
		if err != nil {
			b.note(p, "unreadable: %v (%s)", err, a)
			return nil
		}
		if data, what, err = b.scrubFile(p, read, a); err != nil {
			return err
		}
	case fi.Mode().IsRegular():
		what = fmt.Sprintf("metadata only: mode and owner, content not read (%s)", a)
	default:
		what = fmt.Sprintf("%s: archived as an empty file, existence only (%s)", fi.Mode().Type(), a)
	}
	b.put(loc, fi, data, "")
	b.note(p, "%s", what)
	return nil
}

// scrubFile is what of file p, read as a, the archive holds, and what the
// manifest says of it: a private key empty, credentials redacted.
func (b *builder) scrubFile(p string, data []byte, a Access) ([]byte, string, error) {
	switch {
	case IsPrivateKey(p, data):
		b.keys = append(b.keys, data)
		return []byte{}, "PRIVATE KEY, NOT ARCHIVED: an empty file records only that it exists", nil
	case IsKubeconfig(p):
		if red, n := redactKubeconfig(data); n > 0 {
			return red, fmt.Sprintf("kubeconfig, %d secret values (client keys, tokens, passwords) redacted (%s)", n, a), nil
		}
	case p == containerd.ConfigPath:
		switch red, n, err := containerd.Redact(data); {
		case err != nil && containerd.MayHoldCredential(data):
			return []byte{}, fmt.Sprintf("containerd config, NOT ARCHIVED: it does not parse (%v) "+
				"and may hold registry credentials: an empty file (%s)", err, a), nil
		case err == nil && n > 0:
			return red, fmt.Sprintf("containerd config, %d credential values (registry auth, headers) redacted (%s)", n, a), nil
		}
	case p == proxy.DropIn:
		for _, v := range proxy.Values(data) {
			if err := b.addCredentials(v); err != nil {
				return nil, "", fmt.Errorf("%s: %w", p, err)
			}
		}
		if red := b.redact(string(data)); red != string(data) {
			return []byte(red), fmt.Sprintf("file, proxy credentials redacted (%s)", a), nil
		}
	}
	return data, fmt.Sprintf("file (%s)", a), nil
}

// backend is what the archive holds of etcd's database p, which holds
// the cluster's Secrets: only its membership, what step 10 reads, in the
// same format, so that a replay reads it the same way. The membership is
// the one step 10 read (Options.State): the database is read once per
// run, by pages, never again here.
func (b *builder) backend(p string, a Access) ([]byte, string) {
	f, err := b.peers.Get()
	switch {
	case err != nil || f.DB != p:
		return []byte{}, fmt.Sprintf("etcd database, NOT ARCHIVED (the run recorded no membership of it): an empty file (%s)", a)
	case f.Err != nil:
		return []byte{}, fmt.Sprintf("etcd database, NOT ARCHIVED (its membership is unreadable: %v): an empty file", f.Err)
	}
	return etcdpeers.MembersDB(f.Members), fmt.Sprintf(
		"etcd database, NOT ARCHIVED: a file of its members' names and peer URLs only, in its format (%s)", a)
}

// put adds an entry for node path p: a directory, a symlink to target
// (target != ""), or a regular file holding data. The first entry for a
// path wins.
func (b *builder) put(p string, fi fs.FileInfo, data []byte, target string) {
	if _, ok := b.entries[p]; ok {
		return
	}
	h := tar.Header{Name: strings.TrimPrefix(p, "/"), ModTime: b.mtime, Format: tar.FormatPAX}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		h.Uid, h.Gid = int(st.Uid), int(st.Gid)
	}
	perm := int64(plan.UnixMode(fi.Mode()))
	switch {
	case target != "":
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
	case fi.IsDir():
		// Owner-writable, so that whoever extracts it can fill and
		// remove it; no step looks at a directory's mode.
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", perm|0o700
	default:
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, perm, int64(len(data))
	}
	b.entries[p] = &entry{hdr: h, data: data}
}
