package system

import (
	"strings"

	"github.com/moby/sys/mountinfo"
)

// MountTable reads the mount table for one run of the steps, parsing it
// again only when it changed since the last read: steps 4 to 8 each need
// it. What Read returns is shared (with every other reader of the same
// table, see parseShared): read it, never change it. A nil MountTable
// parses on every read.
type MountTable struct {
	// Fixed: nothing changes the table while it is used (a dry run), so
	// the file is read once, and its first answer (error included) kept.
	Fixed bool
	read  bool
	err   error
	mi    []*mountinfo.Info
}

// Read is ReadMountinfo, from the last parse when the file is unchanged.
func (t *MountTable) Read(sys System) ([]*mountinfo.Info, error) {
	if t == nil {
		return ReadMountinfo(sys)
	}
	if t.Fixed && t.read {
		return t.mi, t.err
	}
	t.read, t.mi = true, nil
	b, err := sys.ReadFile(MountinfoPath, LimitTable)
	if err == nil {
		t.mi, err = parseShared(b) // nil on an error
	}
	t.err = err
	return t.mi, err
}

// Top is the mount visible at mountpoint p (the last one mounted there), or
// nil.
func Top(mi []*mountinfo.Info, p string) *mountinfo.Info {
	for i := len(mi) - 1; i >= 0; i-- {
		if mi[i].Mountpoint == p {
			return mi[i]
		}
	}
	return nil
}

// AllShared reports whether "/" and every mount outside the directory
// except are in a shared peer group: whether `mount --make-rshared /` has
// nothing left to do for the kubelet's volumes (a shared "/" over a slave
// /var would still break Bidirectional mount propagation under
// /var/lib/kubelet). except is /sys/fs/cgroup, which fix_cgroup makes
// private on purpose (counting it would undo that on every run).
func AllShared(mi []*mountinfo.Info, except string) bool {
	if Top(mi, "/") == nil {
		return false
	}
	for _, m := range mi {
		if m.Mountpoint == except || strings.HasPrefix(m.Mountpoint, except+"/") {
			continue
		}
		if !IsShared(m) {
			return false
		}
	}
	return true
}

// IsShared reports whether a mount is in a shared peer group.
func IsShared(m *mountinfo.Info) bool {
	for f := range strings.FieldsSeq(m.Optional) {
		if strings.HasPrefix(f, "shared:") {
			return true
		}
	}
	return false
}

// IsReadOnly reports whether a mount's per-mount options say ro.
func IsReadOnly(m *mountinfo.Info) bool {
	return FlagsFromOptions(m.Options)&ReadOnly != 0
}
