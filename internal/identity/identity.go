package identity

import (
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Files the node's identity lives in.
const (
	MachineID     = "/etc/machine-id"
	DBusMachineID = "/var/lib/dbus/machine-id"
	// ProductName and ProductUUID are the node's own DMI values, bound over
	// the host's; the mount-product-files hook copies them into containers.
	ProductName = "/kind/product_name"
	ProductUUID = "/kind/product_uuid"

	DMIProductName        = "/sys/class/dmi/id/product_name"
	DMIProductUUID        = "/sys/class/dmi/id/product_uuid"
	DMIVirtualProductUUID = "/sys/devices/virtual/dmi/id/product_uuid"
)

// ProductNameValue is what every node reports as its product name (kind#426).
const ProductNameValue = "kind\n"

// NewMachineID returns a random machine-id: 32 lowercase hex digits and a
// newline, as machine-id(5) wants. Like systemd's sd_id128_randomize it is
// shaped as a UUID v4, so it is never all zeros.
func NewMachineID(rand io.Reader) (string, error) {
	b, err := random16(rand)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]) + "\n", nil
}

// NewUUID returns a random UUID v4 in the form /proc/sys/kernel/random/uuid
// gives: lowercase, dashed, with a newline.
func NewUUID(rand io.Reader) (string, error) {
	b, err := random16(rand)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x\n", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

func random16(rand io.Reader) ([16]byte, error) {
	var b [16]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return b, fmt.Errorf("read random bytes: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return b, nil
}

// IsUUID reports whether s (without surrounding blanks) is a UUID in the
// 8-4-4-4-12 hex form.
func IsUUID(s string) bool {
	s = strings.TrimSpace(s)
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	_, err := hex.DecodeString(s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:])
	return err == nil
}

// MachineIDFacts is what fix_machine_id needs.
type MachineIDFacts struct {
	// NewID is the machine-id to write (with its newline).
	NewID string
	// DBus is what /var/lib/dbus/machine-id is: "absent", "file" or
	// "symlink"; DBusLink is a symlink's target.
	DBus     string
	DBusLink string
}

// DetectMachineID draws a new machine-id from rand and looks at D-Bus's copy.
func DetectMachineID(sys system.System, rand io.Reader) (MachineIDFacts, error) {
	var f MachineIDFacts
	var err error
	if f.NewID, err = NewMachineID(rand); err != nil {
		return f, err
	}
	fi, err := sys.Lstat(DBusMachineID)
	switch {
	case system.NotExist(err):
		f.DBus = "absent"
	case err != nil:
		return f, err
	case fi.Mode()&fs.ModeSymlink != 0:
		f.DBus = "symlink"
		if f.DBusLink, err = sys.Readlink(DBusMachineID); err != nil {
			return f, err
		}
	case fi.Mode().IsRegular():
		f.DBus = "file"
	default:
		f.DBus = fi.Mode().Type().String()
	}
	return f, nil
}

// PlanMachineID writes a new machine-id on every boot: the kubelet and CNI
// plugins tell nodes apart by it, and every node starts from the same image.
//
// The reference ran systemd-machine-id-setup, which copies an existing
// /var/lib/dbus/machine-id instead of drawing a new id: every node of an
// image that ships one gets the same id. Here that file becomes a link to
// /etc/machine-id, as Debian's dbus package makes it.
func PlanMachineID(f MachineIDFacts) []plan.Action {
	actions := []plan.Action{
		plan.Info("clearing and regenerating " + MachineID),
		plan.WriteFile(MachineID, []byte(f.NewID), 0o444).OnEveryBoot().
			Because("nodes of one image must not share a machine-id"),
	}
	if f.DBus == "file" {
		actions = append(actions,
			plan.Remove(DBusMachineID).Because("an image-baked D-Bus machine-id would be every node's"),
			plan.Symlink(MachineID, DBusMachineID))
	}
	return actions
}

// DMIFile is one DMI attribute of the host, as the node sees it.
type DMIFile struct {
	Path string
	// Exists: it is a regular file (following symlinks), as the
	// reference's `[[ -f ]]` tests.
	Exists bool
	// Target is Path with every symlink resolved: where a mount on Path
	// lands (/sys/class/dmi/id is a link into /sys/devices/virtual/dmi/id).
	Target string
	// Bound: something is mounted on Target already (the entrypoint ran
	// before in this mount namespace).
	Bound bool
}

// ProductNameFacts is what fix_product_name needs.
type ProductNameFacts struct {
	DMI DMIFile
	// Current is /kind/product_name's content, nil when it does not exist.
	Current []byte
	// Inherit are the per-mount flags of the mount holding /kind: a bind of
	// a file there starts with them, and its read-only remount must repeat
	// them (the kernel refuses to clear a locked flag in a user namespace).
	Inherit system.MountFlags
}

// DetectProductName reads the facts (the mount table through tbl, which
// may be nil).
func DetectProductName(sys system.System, tbl *system.MountTable) (ProductNameFacts, error) {
	var f ProductNameFacts
	mi, err := tbl.Read(sys)
	if err != nil {
		return f, err
	}
	if f.DMI, err = detectDMI(sys, system.NewResolver(sys), mi, DMIProductName); err != nil {
		return f, err
	}
	if !f.DMI.Exists {
		return f, nil
	}
	if f.Current, err = system.ReadOptional(sys, ProductName, system.LimitValue); err != nil {
		return f, err
	}
	f.Inherit = InheritedFlags(mi, ProductName)
	return f, nil
}

// PlanProductName hides the host's hardware name (kind#426): software that
// special-cases cloud VMs by product name must not do so on a node.
func PlanProductName(f ProductNameFacts) []plan.Action {
	if !f.DMI.Exists {
		return nil
	}
	actions := []plan.Action{plan.Info(`faking ` + DMIProductName + ` to be "kind"`)}
	if string(f.Current) != ProductNameValue {
		if f.DMI.Bound {
			// The bind holds /kind/product_name's inode: a rename would
			// not be seen through it.
			actions = append(actions, plan.WriteInPlace(ProductName, []byte(ProductNameValue)))
		} else {
			actions = append(actions, plan.WriteFile(ProductName, []byte(ProductNameValue), 0o644))
		}
	}
	if !f.DMI.Bound {
		actions = append(actions, BindReadOnly(ProductName, f.DMI.Target, f.Inherit)...)
	}
	return actions
}

// ProductUUIDFacts is what fix_product_uuid needs.
type ProductUUIDFacts struct {
	// Current is /kind/product_uuid's content, nil when it does not exist.
	Current []byte
	// NewUUID is written when Current is missing or not a UUID.
	NewUUID string
	// DMI are the class and the virtual-device paths, in that order.
	DMI     []DMIFile
	Inherit system.MountFlags
}

// DetectProductUUID reads the facts, drawing a new UUID from rand only when
// the node has none yet (the mount table through tbl, which may be nil).
func DetectProductUUID(sys system.System, rand io.Reader, tbl *system.MountTable) (ProductUUIDFacts, error) {
	var f ProductUUIDFacts
	var err error
	if f.Current, err = system.ReadOptional(sys, ProductUUID, system.LimitValue); err != nil {
		return f, err
	}
	if !IsUUID(string(f.Current)) {
		if f.NewUUID, err = NewUUID(rand); err != nil {
			return f, err
		}
	}
	mi, err := tbl.Read(sys)
	if err != nil {
		return f, err
	}
	// One resolver for both: on a real sysfs they are one file.
	r := system.NewResolver(sys)
	for _, p := range []string{DMIProductUUID, DMIVirtualProductUUID} {
		d, err := detectDMI(sys, r, mi, p)
		if err != nil {
			return f, err
		}
		f.DMI = append(f.DMI, d)
	}
	f.Inherit = InheritedFlags(mi, ProductUUID)
	return f, nil
}

// PlanProductUUID gives the node a UUID of its own (kind#1027): the kubelet
// reports the DMI product UUID as the node's system UUID, and all nodes on
// one host would share it. The UUID is kept across restarts.
func PlanProductUUID(f ProductUUIDFacts) []plan.Action {
	var actions []plan.Action
	switch {
	case f.Current == nil:
		actions = append(actions, plan.WriteFile(ProductUUID, []byte(f.NewUUID), 0o644).
			Because("a random UUID of this node's own, kept across restarts"))
	case f.NewUUID != "":
		actions = append(actions,
			plan.Warning(fmt.Sprintf("%s holds %s, not a UUID; replacing it", ProductUUID, logline.QuoteClipped(strings.TrimSpace(string(f.Current))))),
			plan.WriteFile(ProductUUID, []byte(f.NewUUID), 0o644))
	}
	msgs := map[string]string{
		DMIProductUUID:        "faking " + DMIProductUUID + " to be random",
		DMIVirtualProductUUID: "faking " + DMIVirtualProductUUID + " as well",
	}
	bound := map[string]bool{}
	for _, d := range f.DMI {
		if !d.Exists {
			continue
		}
		actions = append(actions, plan.Info(msgs[d.Path]))
		// On a real sysfs both paths are one file: bind it once.
		if d.Bound || bound[d.Target] {
			continue
		}
		bound[d.Target] = true
		actions = append(actions, BindReadOnly(ProductUUID, d.Target, f.Inherit)...)
	}
	return actions
}

// BindReadOnly binds source read-only onto target: mount(2) cannot make a
// bind read-only in one call, so it is a bind and then a read-only bind
// remount that repeats the flags the bind inherited.
func BindReadOnly(source, target string, inherit system.MountFlags) []plan.Action {
	return []plan.Action{
		plan.Bind(source, target),
		plan.Mount("", target, "", system.Remount|system.Bind|system.ReadOnly|inherit, ""),
	}
}

// detectDMI looks at one DMI attribute.
func detectDMI(sys system.System, r *system.Resolver, mi []*mountinfo.Info, p string) (DMIFile, error) {
	d := DMIFile{Path: p, Target: p}
	fi, err := sys.Stat(p)
	switch {
	case system.NotExist(err):
		return d, nil
	case err != nil:
		return d, err
	}
	d.Exists = fi.Mode().IsRegular()
	if !d.Exists {
		return d, nil
	}
	if d.Target, err = r.Resolve(p); err != nil {
		return d, err
	}
	d.Bound = slices.ContainsFunc(mi, func(m *mountinfo.Info) bool { return m.Mountpoint == d.Target })
	return d, nil
}

// InheritedFlags returns the per-mount flags (read-only aside) of the mount
// holding p: what a bind of p starts with, and what a read-only remount of
// that bind must repeat.
func InheritedFlags(mi []*mountinfo.Info, p string) system.MountFlags {
	var best *mountinfo.Info
	for _, m := range mi {
		if system.Under(p, m.Mountpoint) && (best == nil || len(m.Mountpoint) >= len(best.Mountpoint)) {
			best = m
		}
	}
	if best == nil {
		return 0
	}
	return system.FlagsFromOptions(best.Options) &^ system.ReadOnly
}
