package system

// The Tree's simulation of the kernel's mounts: Mount and Unmount rewrite
// Root/proc/self/mountinfo as the kernel would change the mount table
// (binds, remounts, propagation), and the queries the replay host answers
// from that table (FSType, bind-mounted files) read it here.

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

func (t *Tree) mounts() ([]*mountinfo.Info, error) {
	b, err := t.readIn(MountinfoPath, LimitTable, 0)
	if err != nil {
		return nil, err
	}
	return ParseMountinfoFile(b)
}

// readMounts is mounts for reading only: the result is shared (see
// parseShared), and must not be changed. FSType looks at the file for
// every path it is asked about: a table that is still the one parsed is
// only compared with it, a chunk at a time, never read whole again (a
// copy of the table kept for that doubled what it cost).
func (t *Tree) readMounts() ([]*mountinfo.Info, error) {
	fd, err := t.openRegularIn(MountinfoPath, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if mi, ok := sharedIfSame(fd); ok {
		return mi, nil
	}
	b, err := readFD(fd, MountinfoPath, LimitTable)
	if err != nil {
		return nil, err
	}
	return parseShared(b)
}

func (t *Tree) isMountpoint(p string) bool {
	mounts, err := t.readMounts()
	return err == nil && Top(mounts, path.Clean(p)) != nil
}

func (t *Tree) Mount(source, target, fstype string, flags MountFlags, data string) error {
	mErr := func(err error) error {
		return &MountError{Op: "mount", Source: source, Target: target, FSType: fstype, Flags: flags, Data: data, Err: err}
	}
	if err := t.fail("mount", target); err != nil {
		return mErr(errors.Unwrap(err))
	}
	mounts, err := t.mounts()
	if err != nil {
		return mErr(err)
	}
	target = path.Clean(target)
	if _, err := t.Stat(target); err != nil {
		return mErr(unix.ENOENT)
	}
	const propagation = Shared | Private | Slave
	switch {
	case flags&propagation != 0:
		if Top(mounts, target) == nil {
			return mErr(unix.EINVAL)
		}
		for _, m := range mounts {
			if m.Mountpoint == target || (flags&Rec != 0 && Under(m.Mountpoint, target)) {
				m.Optional = propagate(m.Optional, flags, mounts)
			}
		}
	case flags&Remount != 0:
		m := Top(mounts, target)
		if m == nil {
			return mErr(unix.EINVAL)
		}
		m.Options = OptionsFromFlags(flags)
		if flags&Bind == 0 {
			// A plain remount changes the superblock, seen by every
			// mount of it in every namespace.
			m.VFSOptions = setFirstOption(m.VFSOptions, flags&ReadOnly != 0)
		}
	case flags&Bind != 0:
		src := Containing(mounts, source)
		if src == nil {
			return mErr(unix.ENOENT)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(path.Clean(source), src.Mountpoint), "/")
		n := *src
		n.ID = nextID(mounts)
		n.Parent = parentID(mounts, target)
		n.Root = path.Join(src.Root, rel)
		n.Mountpoint = target
		mounts = append(mounts, &n)
		if fi, err := t.Stat(source); err == nil && fi.Mode().IsRegular() {
			t.mu.Lock()
			if t.binds == nil {
				t.binds = map[string]string{}
			}
			t.binds[target] = path.Clean(t.resolveLocked(source))
			t.mu.Unlock()
		}
	default:
		mounts = append(mounts, &mountinfo.Info{
			ID: nextID(mounts), Parent: parentID(mounts, target), Root: "/",
			Mountpoint: target, Options: OptionsFromFlags(flags), FSType: fstype,
			Source: source, VFSOptions: setFirstOption(data, flags&ReadOnly != 0),
		})
	}
	if err := t.writeMounts(mounts); err != nil {
		return mErr(err)
	}
	if source == "" {
		source = "none"
	}
	t.record("mount %s on %s (%s)", source, target, flags)
	return nil
}

func (t *Tree) Unmount(target string, flags int) error {
	uErr := func(err error) error { return &MountError{Op: "umount", Target: target, Err: err} }
	if err := t.fail("umount", target); err != nil {
		return uErr(errors.Unwrap(err))
	}
	mounts, err := t.mounts()
	if err != nil {
		return uErr(err)
	}
	target = path.Clean(target)
	top := Top(mounts, target)
	if top == nil {
		return uErr(unix.EINVAL)
	}
	mounts = slices.DeleteFunc(mounts, func(m *mountinfo.Info) bool { return m == top })
	t.mu.Lock()
	delete(t.binds, target)
	if Top(mounts, target) == nil {
		if t.unmounted == nil {
			t.unmounted = map[string]bool{}
		}
		t.unmounted[target] = true
	}
	t.mu.Unlock()
	if err := t.writeMounts(mounts); err != nil {
		return uErr(err)
	}
	t.record("umount %s", target)
	return nil
}

func (t *Tree) writeMounts(mounts []*mountinfo.Info) error {
	var b []byte
	for _, m := range mounts {
		b = append(append(b, FormatMountinfo(m)...), '\n')
	}
	w, err := t.Files()
	if err != nil {
		return err
	}
	return w.WriteFile(MountinfoPath, b, 0o444)
}

// FormatMountinfo renders one mountinfo line, escaping as the kernel does.
func FormatMountinfo(m *mountinfo.Info) string {
	fields := []string{
		strconv.Itoa(m.ID), strconv.Itoa(m.Parent),
		fmt.Sprintf("%d:%d", m.Major, m.Minor),
		escapeMountinfo(m.Root), escapeMountinfo(m.Mountpoint), m.Options,
	}
	if m.Optional != "" {
		fields = append(fields, m.Optional)
	}
	fields = append(fields, "-", m.FSType, escapeMountinfo(m.Source), m.VFSOptions)
	return strings.Join(fields, " ")
}

func escapeMountinfo(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Containing is the mount that holds path p: the deepest mount point above
// it, the latest one where several stack.
func Containing(mounts []*mountinfo.Info, p string) *mountinfo.Info {
	var best *mountinfo.Info
	for _, m := range mounts {
		if Under(p, m.Mountpoint) && (best == nil || len(m.Mountpoint) >= len(best.Mountpoint)) {
			best = m
		}
	}
	return best
}

func nextID(mounts []*mountinfo.Info) int {
	id := 0
	for _, m := range mounts {
		id = max(id, m.ID)
	}
	return id + 1
}

func parentID(mounts []*mountinfo.Info, target string) int {
	if m := Containing(mounts, target); m != nil {
		return m.ID
	}
	return 0
}

// propagate rewrites the optional fields of a mountinfo line for a change
// of propagation type.
func propagate(optional string, flags MountFlags, mounts []*mountinfo.Info) string {
	var keep []string
	shared := false
	for _, f := range strings.Fields(optional) {
		switch {
		case strings.HasPrefix(f, "shared:"):
			shared = true
			if flags&Shared != 0 {
				keep = append(keep, f)
			}
		case strings.HasPrefix(f, "master:"):
			if flags&Private == 0 {
				keep = append(keep, f)
			}
		default:
			keep = append(keep, f)
		}
	}
	if flags&Shared != 0 && !shared {
		keep = append([]string{"shared:" + strconv.Itoa(nextPeerGroup(mounts))}, keep...)
	}
	return strings.Join(keep, " ")
}

func nextPeerGroup(mounts []*mountinfo.Info) int {
	n := 0
	for _, m := range mounts {
		for _, f := range strings.Fields(m.Optional) {
			if v, ok := strings.CutPrefix(f, "shared:"); ok {
				if i, err := strconv.Atoi(v); err == nil {
					n = max(n, i)
				}
			}
		}
	}
	return n + 1
}

func setFirstOption(opts string, ro bool) string {
	want := "rw"
	if ro {
		want = "ro"
	}
	if first, rest, _ := strings.Cut(opts, ","); first == "rw" || first == "ro" {
		opts = rest
	}
	if opts == "" {
		return want
	}
	return want + "," + opts
}
