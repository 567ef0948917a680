package plan

import (
	"fmt"
	"io/fs"
	"path"
	"syscall"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// MaxPlannedDirs is the most directories a plan's Mkdirs may span, each
// with all its ancestors (what Preflight keeps for them). A boot's plan
// spans a few thousand (the kubelet roots of 1024 cgroup mounts,
// fix_cgroup's cap, 2000 levels deep under one directory); one spanning
// millions (1000 cgroup mounts, each on a branch of its own 2000 levels
// deep: 11 s of CPU and 290 MiB to preflight) is a host to refuse, not
// one to walk.
const MaxPlannedDirs = 1 << 16

// Preflight finds, reading sys only, a fatal action of actions that the
// kernel would refuse for the file types it meets: a file written over a
// directory (/etc/machine-id made a directory), below something that is
// not one (/kind a regular file), or a symlink where something is (a link
// to another unit). A dry run must not call a plan fine
// that its apply would stop at. Directories the plan makes itself (Mkdir)
// count as there, paths it removes as gone.
func Preflight(sys system.System, actions []Action) error {
	// made holds the directories the plan makes, each with the
	// generation it was marked in: a Mkdir marks its ancestors up to one
	// already marked in this generation (they are marked up to "/"
	// already), so that deep paths cost their length once, not once per
	// level. A Remove starts a new generation.
	made := map[string]int{}
	gen := 1
	removed := map[string]bool{}
	// seen memoizes sys.Stat: the walk up from each path asks again for
	// the parents of the paths before it. Below a path that is not a
	// directory on sys nothing is there, and needs no stat either: the
	// kubelet roots of 150k cgroup mounts were 450k stats.
	type stat struct{ exists, dir bool }
	seen := map[string]stat{}
	isDir := func(p string) (exists, dir bool) {
		if made[p] > 0 {
			return true, true
		}
		if removed[p] {
			return false, false
		}
		if s, ok := seen[p]; ok {
			return s.exists, s.dir
		}
		var s stat
		if up, ok := seen[system.Parent(p)]; !ok || up.dir {
			fi, err := sys.Stat(p)
			s = stat{exists: err == nil, dir: err == nil && fi.IsDir()}
		}
		seen[p] = s
		return s.exists, s.dir
	}
	// parentOKDown: the nearest existing ancestor of p is a directory,
	// by a walk down from "/" that knows, before it asks sys about an
	// ancestor, whether one above is missing there (or is not a
	// directory): then nothing below is, and needs no stat. Walking up
	// from p asked sys about every level of a deep path whose top alone
	// exists, each stat resolving its whole path again: quadratic in the
	// depth (2.6 s of CPU for a cgroup mount 32k levels deep), and capture
	// archived every level asked.
	parentOKDown := func(p string) bool {
		if !path.IsAbs(p) {
			return parentOKUp(p, isDir)
		}
		ok := true    // the nearest existing ancestor so far is a directory ("/")
		onSys := true // no ancestor so far is known to be missing on sys
		for i := 1; i < len(p); i++ {
			if p[i] != '/' {
				continue
			}
			q := p[:i]
			exists, dir := true, true
			switch {
			case made[q] > 0:
			case removed[q]:
				exists = false
			default:
				s, known := seen[q]
				if !known {
					if onSys {
						fi, err := sys.Stat(q)
						s = stat{exists: err == nil, dir: err == nil && fi.IsDir()}
					}
					seen[q] = s
				}
				exists, dir = s.exists, s.dir
			}
			if s, known := seen[q]; known && !s.dir {
				onSys = false
			}
			if exists {
				ok = dir
			}
		}
		return ok
	}
	// parentOK is parentOKDown, started from the nearest ancestor known
	// without sys (made, or seen): most paths are next to one the plan
	// made or asked about (a kubelet root beside another, in a mount
	// point under a made directory), and a walk from "/" looked up every
	// level of those again. Below that ancestor nothing is known, so it
	// asks sys a level at a time, down to the first that is missing.
	parentOK := func(p string) bool {
		if !path.IsAbs(p) {
			return parentOKUp(p, isDir)
		}
		k := system.Parent(p)
		for k != "/" && made[k] == 0 && !removed[k] {
			if _, ok := seen[k]; ok {
				break
			}
			k = system.Parent(k)
		}
		onSys := true // sys may have what is below k
		if k != "/" {
			exists, dir := isDir(k) // known: no stat
			if !exists {
				return parentOKDown(p) // the nearest existing is above k
			}
			if !dir {
				return false // nothing below k exists
			}
			if s, known := seen[k]; known && !s.dir {
				onSys = false
			}
		}
		// Each level below k: asked of sys down to the first missing
		// one, and known missing below it, so that neither a later
		// path through them nor isDir's look at p asks again.
		up := system.Parent(p)
		for i := len(k) + 1; i <= len(up); i++ {
			if i < len(up) && up[i] != '/' {
				continue
			}
			var s stat
			if onSys {
				fi, err := sys.Stat(up[:i])
				s = stat{exists: err == nil, dir: err == nil && fi.IsDir()}
			}
			seen[up[:i]] = s
			if s.exists && !s.dir {
				return false
			}
			onSys = s.dir
		}
		return true
	}
	lexists := func(p string) bool {
		_, err := sys.Lstat(p)
		return err == nil
	}
	fail := func(op, p string, errno syscall.Errno) error {
		return &fs.PathError{Op: op + " (planned)", Path: p, Err: errno}
	}
	for _, a := range actions {
		if a.OnFail != Fatal {
			continue
		}
		p := a.Path
		if path.IsAbs(p) {
			p = system.NodePath(p) // no path.Clean's scan of a clean path
		} else {
			p = path.Clean(p)
		}
		switch a.Op {
		case OpWrite, OpWriteInPlace, OpSymlink:
			if !parentOK(p) {
				return fail(string(a.Op), p, syscall.ENOTDIR)
			}
			if exists, dir := isDir(p); exists && dir {
				return fail(string(a.Op), p, syscall.EISDIR)
			}
			// symlink(2) replaces nothing, a link (dangling or not,
			// which Stat does not see) included.
			if a.Op == OpSymlink && (made[p] > 0 || !removed[p] && lexists(p)) {
				return fail(string(a.Op), p, syscall.EEXIST)
			}
		case OpMkdir:
			// The parent first: what it finds spares the stat of p.
			if !parentOK(p) {
				return fail(string(a.Op), p, syscall.ENOTDIR)
			}
			if exists, dir := isDir(p); exists && !dir {
				return fail(string(a.Op), p, syscall.ENOTDIR)
			}
			for d := p; d != "/" && d != "." && made[d] != gen; d = system.Parent(d) {
				made[d] = gen
			}
			if len(made) > MaxPlannedDirs {
				return fmt.Errorf("mkdir (planned) %s: the plan's directories and their ancestors are more than %d (MaxPlannedDirs)", logline.QuoteClipped(p), MaxPlannedDirs)
			}
		case OpRemove:
			removed[p] = true
			delete(made, p)
			gen++
		}
	}
	return nil
}

// parentOKUp is Preflight's parentOK of a relative path, walking up from
// it: the nearest existing ancestor of p is a directory.
func parentOKUp(p string, isDir func(string) (exists, dir bool)) bool {
	for d := system.Parent(p); ; d = system.Parent(d) {
		if exists, dir := isDir(d); exists {
			return dir
		}
		if d == "/" || d == "." {
			return true
		}
	}
}
