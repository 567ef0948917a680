package system

// This file holds path facilities: resolving symlinks through a System, and
// whether a path lies under a directory.

import (
	"io/fs"
	"path"
	"strings"
	"syscall"
)

// Under reports whether the absolute, clean path p is dir or lies below it.
func Under(p, dir string) bool {
	// Not HasPrefix(p, dir+"/"): a mount table's lookups ask it of every
	// mount, and the copy of a 4 KiB mountpoint each time was most of it.
	return p == dir || dir == "/" || len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}

// Parent is path.Dir of a clean path, without cleaning it again (which
// made walking up a deep path quadratic in its length).
func Parent(p string) string {
	switch i := strings.LastIndexByte(p, '/'); {
	case i > 0:
		return p[:i]
	case i == 0:
		return "/"
	}
	return "."
}

// MaxLinkHops is how many symlinks a resolution follows before it fails
// with ELOOP, as the kernel does (40).
const MaxLinkHops = 40

// Resolver resolves symlinks through a System and remembers what it has
// looked at: paths resolved one after the other often share their
// directories (/sys/class/dmi/id is a link into /sys/devices/virtual/dmi/id),
// and resolving each on its own would look at the same directories again.
// A Resolver is for one detection, during which nothing changes the links.
type Resolver struct {
	sys  System
	seen map[string]seenPath
}

func NewResolver(sys System) *Resolver {
	return &Resolver{sys: sys, seen: make(map[string]seenPath, 16)}
}

// seenPath is what the resolver found at a path: the target of the symlink
// there ("" when it is not one).
type seenPath struct {
	link   string
	isLink bool
}

// lookup says whether p is a symlink, and to what, asking sys once per path.
func (r *Resolver) lookup(p string) (link string, isLink bool, err error) {
	if s, ok := r.seen[p]; ok {
		return s.link, s.isLink, nil
	}
	fi, err := r.sys.Lstat(p)
	if err != nil {
		return "", false, err
	}
	if isLink = fi.Mode()&fs.ModeSymlink != 0; isLink {
		if link, err = r.sys.Readlink(p); err != nil {
			return "", false, err
		}
	}
	r.seen[p] = seenPath{link, isLink}
	return link, isLink, nil
}

// Resolve resolves every symlink in the absolute path p, as the kernel does
// for a mount target, through r's System (so that a fake tree's links stay
// inside it), sharing what r has looked at.
//
// It walks s, the path still to resolve, keeping in s[:n] the part
// resolved so far ("/" when n is 0), so that each prefix it looks up is a
// slice of s rather than a new string; s is rebuilt only where a symlink
// (or a ".." in a link's text) breaks that. The path and each link's text
// lose their empty and "." names in one pass before they join s, so the
// walk never meets one: a padded path (a/./././b) costs its length, not
// its length times its padding.
func (r *Resolver) Resolve(p string) (string, error) {
	s := p
	if !path.IsAbs(s) || path.Clean(s) != s {
		s = NodePath(s)
	}
	n := 0
	for hops := 0; n+1 < len(s); {
		// s[n] is a slash; the next name runs to the next one.
		name, _, _ := strings.Cut(s[n+1:], "/")
		end := n + 1 + len(name)
		if name == ".." {
			// s[:n] has no symlink in it: its parent is lexical.
			d := parentLen(s, n)
			s, n = s[:d]+s[end:], d
			continue
		}
		link, isLink, err := r.lookup(s[:end])
		if err != nil {
			return "", err
		}
		if !isLink {
			n = end
			continue
		}
		if hops++; hops > MaxLinkHops {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: syscall.ELOOP}
		}
		// The link replaces its own name; it is relative to s[:n], or to
		// "/" when absolute. Leading ".." go up from there lexically, as
		// above, so that only one new string is made.
		if path.IsAbs(link) {
			n = 0
		}
		link = dropDots(link)
		for link == ".." || strings.HasPrefix(link, "../") {
			n, link = parentLen(s, n), strings.TrimPrefix(link[2:], "/")
		}
		if link == "" {
			s = s[:n] + s[end:]
		} else {
			s = s[:n] + "/" + link + s[end:]
		}
	}
	if n == 0 {
		return "/", nil
	}
	return s[:n], nil
}

// dropDots returns a link's text without its empty and "." names and
// without leading or trailing slashes: "./a//./b/" is "a/b". ".." names
// stay, since what they go up from may be a symlink. It makes one new
// string, in one pass.
func dropDots(link string) string {
	var b strings.Builder
	b.Grow(len(link))
	for name := range strings.SplitSeq(link, "/") {
		if name == "" || name == "." {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(name)
	}
	return b.String()
}

// parentLen is the length of the parent of s[:n] in s (0 for "/").
func parentLen(s string, n int) int {
	return max(strings.LastIndexByte(s[:n], '/'), 0)
}
