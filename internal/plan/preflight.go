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
	// The maps are made at their first write: most steps plan no Mkdir
	// or Remove, and maps reached through f are allocated on the heap.
	f := preflight{sys: sys, gen: 1}
	fail := func(op Op, p string, errno syscall.Errno) error {
		return &fs.PathError{Op: string(op) + " (planned)", Path: p, Err: errno}
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
			if !f.parentOK(p) {
				return fail(a.Op, p, syscall.ENOTDIR)
			}
			if s := f.at(p); s.exists && s.dir {
				return fail(a.Op, p, syscall.EISDIR)
			}
			// symlink(2) replaces nothing, a link (dangling or not,
			// which Stat does not see) included.
			if a.Op == OpSymlink && (f.made[p] > 0 || !f.removed[p] && f.lexists(p)) {
				return fail(a.Op, p, syscall.EEXIST)
			}
		case OpMkdir:
			// The parent first: what it finds spares the stat of p.
			if !f.parentOK(p) {
				return fail(a.Op, p, syscall.ENOTDIR)
			}
			if s := f.at(p); s.exists && !s.dir {
				return fail(a.Op, p, syscall.ENOTDIR)
			}
			// A Mkdir marks its ancestors up to one already marked in
			// this generation (those are marked up to "/"), so that
			// deep paths cost their length once, not once per level.
			if f.made == nil {
				f.made = map[string]int{}
			}
			for d := p; d != "/" && d != "." && f.made[d] != f.gen; d = system.Parent(d) {
				f.made[d] = f.gen
			}
			if len(f.made) > MaxPlannedDirs {
				return fmt.Errorf("mkdir (planned) %s: the plan's directories and their ancestors are more than %d (MaxPlannedDirs)", logline.QuoteClipped(p), MaxPlannedDirs)
			}
		case OpRemove:
			if f.removed == nil {
				f.removed = map[string]bool{}
			}
			f.removed[p] = true
			delete(f.made, p)
			f.gen++ // what a Mkdir marked before may be gone
		}
	}
	return nil
}

// fact is what is at a path: nothing, a directory, or something else.
type fact struct{ exists, dir bool }

// preflight is what Preflight knows of the paths so far.
type preflight struct {
	sys system.System
	// made holds the directories the plan makes, each with the
	// generation it was marked in; a Remove starts a new one.
	made    map[string]int
	gen     int
	removed map[string]bool
	// seen memoizes sys.Stat: the paths of a plan share their parents
	// (the kubelet roots of 150k cgroup mounts were 450k stats).
	seen map[string]fact
}

// onSys is what sys has at p, asked once; ask false: p is below what sys
// has as no directory, so nothing is there and sys is not asked.
func (f *preflight) onSys(p string, ask bool) fact {
	if s, ok := f.seen[p]; ok {
		return s
	}
	var s fact
	if ask {
		fi, err := f.sys.Stat(p)
		s = fact{exists: err == nil, dir: err == nil && fi.IsDir()}
	}
	if f.seen == nil {
		f.seen = map[string]fact{}
	}
	f.seen[p] = s
	return s
}

// atAsk is what p is when the plan reaches it: made, removed, or as on
// sys (onSys).
func (f *preflight) atAsk(p string, ask bool) fact {
	switch {
	case f.made[p] > 0:
		return fact{exists: true, dir: true}
	case f.removed[p]:
		return fact{}
	}
	return f.onSys(p, ask)
}

// at is atAsk, asking sys unless p's parent is known to be no directory
// there.
func (f *preflight) at(p string) fact {
	up, known := f.seen[system.Parent(p)]
	return f.atAsk(p, !known || up.dir)
}

// parentOK reports whether the nearest existing ancestor of p is a
// directory. It starts at the nearest ancestor known to exist (made, or
// seen; "/" at worst) and walks down from there, so that sys learns of
// each level's parent before the level: below the first level missing on
// sys nothing is asked. Walking up from p instead asked sys about every
// level of a deep path whose top alone exists, each stat resolving its
// whole path again (2.6 s of CPU for a cgroup mount 32k levels deep), and
// capture archived every level asked.
func (f *preflight) parentOK(p string) bool {
	up := system.Parent(p)
	if up == "/" || up == "." {
		return true
	}
	k := up
	for ; k != "/" && k != "."; k = system.Parent(k) {
		if s, ok := f.seen[k]; f.made[k] > 0 || ok && s.exists && !f.removed[k] {
			break
		}
	}
	ok, ask, start := true, true, 1
	if k != "/" && k != "." {
		s, known := f.seen[k]
		ok, ask, start = f.atAsk(k, false).dir, !known || s.dir, len(k)+1
	}
	for i := start; i <= len(up); i++ {
		if i < len(up) && up[i] != '/' {
			continue
		}
		s := f.atAsk(up[:i], ask)
		if on, known := f.seen[up[:i]]; known && !on.dir {
			ask = false
		}
		if s.exists {
			ok = s.dir
		}
	}
	return ok
}

func (f *preflight) lexists(p string) bool {
	_, err := f.sys.Lstat(p)
	return err == nil
}
