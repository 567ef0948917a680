package mounts

import (
	"cmp"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// DefaultPath is searched when PATH is unset, as a shell would.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Binary is a mount or umount executable found on PATH.
type Binary struct {
	Name   string // "mount"
	Path   string // "" when not found
	UID    int
	GID    int
	Mode   fs.FileMode
	FSType string
}

// Facts is what fix_mount needs.
type Facts struct {
	Mount, Umount Binary
	// Sys is the mount at /sys, nil when nothing is mounted there.
	Sys *mountinfo.Info
}

// Describe summarises the binaries for --dry-run: "PATH UID:GID MODE on
// FSTYPE" or "NAME not found", for both.
func (f Facts) Describe() string {
	var parts []string
	for _, bin := range []Binary{f.Mount, f.Umount} {
		if bin.Path == "" {
			parts = append(parts, bin.Name+" not found")
		} else {
			parts = append(parts, fmt.Sprintf("%s %d:%d %s on %s", bin.Path, bin.UID, bin.GID, bin.Mode, bin.FSType))
		}
	}
	return strings.Join(parts, ", ")
}

// Detect finds the binaries on searchPath and reads the mount table
// (through tbl, which may be nil).
func Detect(sys system.System, searchPath string, tbl *system.MountTable) (Facts, error) {
	var f Facts
	// The mount table first: a replayed host's statfs answers come from
	// it, and its own error says what is wrong with it.
	mi, err := tbl.Read(sys)
	if err != nil {
		return Facts{}, err
	}
	if f.Mount, err = lookBinary(sys, "mount", searchPath); err != nil {
		return Facts{}, err
	}
	if f.Umount, err = lookBinary(sys, "umount", searchPath); err != nil {
		return Facts{}, err
	}
	f.Sys = system.Top(mi, "/sys")
	return f, nil
}

func lookBinary(sys system.System, name, searchPath string) (Binary, error) {
	b := Binary{Name: name}
	// Each directory looked in once: a PATH of a megabyte may name one
	// directory hundreds of thousands of times.
	seen := map[string]bool{}
	for dir := range strings.SplitSeq(cmp.Or(searchPath, DefaultPath), ":") {
		if !path.IsAbs(dir) {
			// A relative PATH entry means the working directory; an
			// entrypoint must not depend on it.
			continue
		}
		p := path.Join(dir, name)
		if seen[p] {
			continue
		}
		seen[p] = true
		fi, err := sys.Stat(p)
		if system.NotExist(err) {
			continue
		}
		if err != nil {
			return Binary{}, err
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		b.Path, b.Mode = p, fi.Mode()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			b.UID, b.GID = int(st.Uid), int(st.Gid)
		}
		if b.FSType, err = sys.FSType(p); err != nil {
			return Binary{}, err
		}
		return b, nil
	}
	return b, nil
}

// Plan returns fix_mount's actions.
func Plan(f Facts) []plan.Action {
	actions := []plan.Action{plan.Info("ensuring we can execute mount/umount even with userns-remap")}
	for _, b := range []Binary{f.Mount, f.Umount} {
		if b.Path == "" {
			actions = append(actions, plan.Warning(b.Name+" not found on PATH; leaving it as it is"))
			continue
		}
		// With userns-remap the image's root-owned setuid binaries appear
		// owned by nobody; the kernel then refuses to run them setuid.
		if b.UID != 0 || b.GID != 0 {
			actions = append(actions, plan.Chown(b.Path, 0, 0))
		}
		if b.Mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			actions = append(actions, plan.Chmod(b.Path, b.Mode&^(fs.ModeSetuid|fs.ModeSetgid)&(fs.ModePerm|fs.ModeSticky)))
		}
	}
	if f.Mount.FSType == "aufs" {
		// moby/moby#9547: "Text file busy" running a binary just changed on aufs.
		// As the reference, on every run; it is harmless, so a restart
		// is not expected to plan it away.
		actions = append(actions, plan.Info("detected aufs, calling sync"), plan.Sync().OnEveryBoot())
	}

	// systemd in a container wants a read-only /sys (systemd.io/CONTAINER_INTERFACE),
	// but --privileged makes it writable.
	actions = append(actions, plan.Info("remounting /sys read-only"))
	switch {
	case f.Sys == nil:
		actions = append(actions, plan.Warning("nothing is mounted at /sys; not remounting it"))
	case !system.IsReadOnly(f.Sys):
		actions = append(actions, SysReadOnly(f.Sys))
	}

	// For mount propagation into containers (kubelet volumes). On every
	// boot, as the script: it is one syscall, and deciding it is not needed
	// went wrong (a v2 node whose mounts but /sys/fs/cgroup were shared kept
	// /sys/fs/cgroup private, which the script's node has shared).
	return append(actions, plan.Info("making mounts shared"),
		plan.Mount("", "/", "", system.Rec|system.Shared, "").
			Because("mount propagation for the kubelet's volumes").OnEveryBoot())
}

// SysReadOnly remounts the /sys mount read-only, keeping its other flags.
// It is a bind remount: a plain remount changes the sysfs superblock, which
// is shared with the host when the node shares its network namespace, and
// would make the host's /sys read-only too. The kernel refuses (EPERM) a
// remount that drops a locked flag such as nosuid, so every current flag is
// passed again.
func SysReadOnly(m *mountinfo.Info) plan.Action {
	flags := system.FlagsFromOptions(m.Options) | system.Remount | system.Bind | system.ReadOnly
	return plan.Mount("", m.Mountpoint, "", flags, "").
		Because("systemd expects a read-only /sys in a container").
		ToleratedInUserNS("UserNS: ignoring mount fail")
}
