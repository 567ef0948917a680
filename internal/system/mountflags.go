package system

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// MountFlags are mount(2) flags; they print by name so that plans, logs and
// errors say "bind,remount,ro" rather than 4129.
type MountFlags uintptr

// The flags the entrypoint uses, in the order they are printed.
const (
	Remount  MountFlags = unix.MS_REMOUNT
	Bind     MountFlags = unix.MS_BIND
	Rec      MountFlags = unix.MS_REC
	ReadOnly MountFlags = unix.MS_RDONLY
	NoSuid   MountFlags = unix.MS_NOSUID
	NoDev    MountFlags = unix.MS_NODEV
	NoExec   MountFlags = unix.MS_NOEXEC
	NoAtime  MountFlags = unix.MS_NOATIME
	NoDirAt  MountFlags = unix.MS_NODIRATIME
	RelAtime MountFlags = unix.MS_RELATIME
	StrictAt MountFlags = unix.MS_STRICTATIME
	// NoSymFol is Linux 5.10's per-mount nosymfollow.
	NoSymFol MountFlags = unix.MS_NOSYMFOLLOW
	Shared   MountFlags = unix.MS_SHARED
	Private  MountFlags = unix.MS_PRIVATE
	Slave    MountFlags = unix.MS_SLAVE
)

type flagName struct {
	flag MountFlags
	name string
}

// perMount are the per-mount options of a mountinfo line, as the kernel
// prints them after "rw" or "ro": the flags a bind remount must repeat.
// The kernel refuses (EPERM) a remount that would clear a locked flag
// such as nosuid, and silently clears any it is not given, so a
// flags-preserving remount passes all of them again.
var perMount = []flagName{
	{ReadOnly, "ro"},
	{NoSuid, "nosuid"},
	{NoDev, "nodev"},
	{NoExec, "noexec"},
	{NoAtime, "noatime"},
	{NoDirAt, "nodiratime"},
	{RelAtime, "relatime"},
	{StrictAt, "strictatime"},
	{NoSymFol, "nosymfollow"},
}

var flagNames = append([]flagName{
	{Remount, "remount"},
	{Bind, "bind"},
	{Rec, "rec"},
	{Shared, "shared"},
	{Private, "private"},
	{Slave, "slave"},
}, perMount...)

func (f MountFlags) String() string {
	if f == 0 {
		return "none"
	}
	var names []string
	for _, n := range flagNames {
		if f&n.flag != 0 {
			names = append(names, n.name)
			f &^= n.flag
		}
	}
	if f != 0 {
		names = append(names, fmt.Sprintf("%#x", uintptr(f)))
	}
	return strings.Join(names, ",")
}

// FlagsFromOptions converts a mountinfo per-mount option list
// ("rw,nosuid,nodev,noexec,relatime") into mount flags.
func FlagsFromOptions(opts string) MountFlags {
	var f MountFlags
	for o := range strings.SplitSeq(opts, ",") {
		for _, n := range perMount {
			if o == n.name {
				f |= n.flag
			}
		}
	}
	return f
}

// OptionsFromFlags is the inverse of FlagsFromOptions for the per-mount
// options, as the kernel prints them in mountinfo.
func OptionsFromFlags(f MountFlags) string {
	opts := []string{"rw"}
	if f&ReadOnly != 0 {
		opts[0] = "ro"
	}
	for _, n := range perMount[1:] {
		if f&n.flag != 0 {
			opts = append(opts, n.name)
		}
	}
	return strings.Join(opts, ",")
}

// MountError is a failed mount(2) or umount2(2), with every argument.
type MountError struct {
	Op     string // "mount" or "umount"
	Source string
	Target string
	FSType string
	Flags  MountFlags
	Data   string
	Err    error
}

func (e *MountError) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Source != "" {
		fmt.Fprintf(&b, " %s", e.Source)
	}
	fmt.Fprintf(&b, " on %s", e.Target)
	if e.FSType != "" {
		fmt.Fprintf(&b, " type %s", e.FSType)
	}
	if e.Op == "mount" {
		fmt.Fprintf(&b, " (%s", e.Flags)
		if e.Data != "" {
			fmt.Fprintf(&b, ", data %q", e.Data)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *MountError) Unwrap() error { return e.Err }
