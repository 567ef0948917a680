package containerd

import (
	"bytes"
	"cmp"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

const (
	// ConfigPath is containerd's configuration file.
	ConfigPath = "/etc/containerd/config.toml"
	// SnapshotterEnv overrides the snapshotter choice.
	SnapshotterEnv = "KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER"
	// FuseUnit runs the fuse-overlayfs snapshotter plugin.
	FuseUnit = "containerd-fuse-overlayfs.service"

	kindDir        = "/kind"
	permitInUserNS = "/sys/module/overlay/parameters/permit_mounts_in_userns"
	selinuxLabel   = "/proc/self/attr/current"
)

// unitDirs are where systemctl enable looks for a unit, in its order.
var unitDirs = []string{"/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}

// Facts is what configure_containerd needs.
type Facts struct {
	UserNS bool
	// Snapshotter is the chosen snapshotter, "" to keep the configured one.
	Snapshotter string
	// SnapshotterSource says why (shown by --dry-run).
	SnapshotterSource string
	KindFSType        string
	// Overlay probe (user namespace only): the permit_mounts_in_userns
	// parameter exists; whether a trial overlay mount was made, and why it
	// failed; an SELinux label.
	PermitMountsInUserNS bool
	OverlayTried         bool
	OverlayErr           error
	SELinux              bool
	// Config is config.toml, nil if it does not exist.
	Config     []byte
	ConfigMode fs.FileMode
	// FuseUnit is the unit file's path and content, when it exists, and the
	// symlinks that enabling it needs, each "link -> target".
	FuseUnitPath string
	FuseUnit     []byte
	FuseLinks    map[string]string
}

// Detect chooses the snapshotter and reads the config.
func Detect(sys system.System, getenv func(string) string, userNS bool) (Facts, error) {
	f := Facts{UserNS: userNS, Snapshotter: getenv(SnapshotterEnv)}
	var err error
	switch f.KindFSType, err = sys.FSType(kindDir); {
	case system.NotExist(err):
		// Not a node image (a dry run on a plain host): no filesystem
		// to choose a snapshotter by.
		f.KindFSType = "(no " + kindDir + ")"
	case err != nil:
		return f, err
	}
	switch {
	case f.Snapshotter != "":
		f.SnapshotterSource = "from " + SnapshotterEnv
	case f.KindFSType == "zfs":
		// Not the zfs snapshotter: it skews against the host's zfs.
		f.Snapshotter, f.SnapshotterSource = "native", "/kind is on zfs"
	case f.KindFSType == "fuseblk":
		f.Snapshotter, f.SnapshotterSource = "fuse-overlayfs", "/kind is on fuse"
	case userNS:
		if _, err := sys.Stat(permitInUserNS); err == nil {
			f.PermitMountsInUserNS = true
		} else {
			f.OverlayTried, f.OverlayErr = true, sys.OverlayTrial()
			if f.OverlayErr == nil {
				label, _ := sys.ReadFile(selinuxLabel, system.LimitValue)
				f.SELinux = bytes.Contains(label, []byte("_t:"))
			}
		}
		if f.PermitMountsInUserNS || f.OverlayErr != nil {
			f.Snapshotter, f.SnapshotterSource = "fuse-overlayfs", "overlayfs is not usable in this user namespace"
		} else {
			f.SnapshotterSource = "configured (overlayfs works in this user namespace)"
		}
	default:
		f.SnapshotterSource = "configured"
	}

	switch fi, err := sys.Stat(ConfigPath); {
	case err == nil:
		f.ConfigMode = fi.Mode().Perm()
		if f.Config, err = sys.ReadFile(ConfigPath, maxConfigSize); err != nil {
			return f, err
		}
	case !system.NotExist(err):
		return f, err
	}

	if f.Snapshotter == "fuse-overlayfs" {
		if err := detectFuseUnit(sys, &f); err != nil {
			return f, err
		}
	}
	return f, nil
}

// firstUnit is the unit file systemd picks for name, the first of
// unitDirs that holds one: its path and content, nil when none does.
func firstUnit(sys system.System, name string) (string, []byte, error) {
	for _, dir := range unitDirs {
		p := path.Join(dir, name)
		if b, err := system.ReadOptional(sys, p, system.LimitConfig); err != nil || b != nil {
			return p, b, err
		}
	}
	return "", nil, nil
}

func detectFuseUnit(sys system.System, f *Facts) error {
	p, b, err := firstUnit(sys, FuseUnit)
	if err != nil || b == nil {
		return err
	}
	f.FuseUnitPath, f.FuseUnit = p, b
	links, err := enableLinks(f.FuseUnitPath, f.FuseUnit)
	if err != nil {
		return err
	}
	f.FuseLinks = map[string]string{}
	for link, target := range links {
		// A link that leads to the unit, however written (relative,
		// as `ln -s ../UNIT` makes it), is the unit enabled.
		if cur, err := sys.Readlink(link); err == nil && resolveLink(link, cur) == target {
			continue
		}
		f.FuseLinks[link] = target
	}
	return nil
}

// resolveLink is where the symlink at link, holding target, points.
func resolveLink(link, target string) string {
	if path.IsAbs(target) {
		return path.Clean(target)
	}
	return path.Join(path.Dir(link), target)
}

// installDirs are the suffixes of the directories `systemctl enable` links
// a unit into, by the [Install] key that names the unit that wants it.
var installDirs = map[string]string{"WantedBy": ".wants", "RequiredBy": ".requires"}

// enableLinks are the symlinks `systemctl enable` makes for a unit: one in
// /etc/systemd/system/T.wants/ for each WantedBy=T of its [Install]
// section (RequiredBy= likewise, in .requires/).
func enableLinks(unitPath string, content []byte) (map[string]string, error) {
	opts, err := unit.DeserializeOptions(bytes.NewReader(content))
	if err != nil {
		// The parser quotes what it could not read, all of it: a line of
		// binary can make a kilobyte of log line.
		msg := err.Error()
		if len(msg) > 200 {
			msg = strings.ToValidUTF8(msg[:200], "") + "..."
		}
		return nil, fmt.Errorf("%s: %s", unitPath, msg)
	}
	links := map[string]string{}
	name := path.Base(unitPath)
	for _, o := range opts {
		suffix, ok := installDirs[o.Name]
		if o.Section != "Install" || !ok {
			continue
		}
		for _, t := range strings.Fields(o.Value) {
			// A name with a '/' would put the link anywhere on the node.
			if !validUnitName(t) {
				return nil, fmt.Errorf("%s: %s= names %s, which is not a unit name", unitPath, o.Name, logline.QuoteClipped(t))
			}
			links[path.Join("/etc/systemd/system", t+suffix, name)] = unitPath
		}
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("%s: no WantedBy= in [Install]: cannot be enabled", unitPath)
	}
	return links, nil
}

// unitTypes are the suffixes of systemd's unit names (systemd.unit(5)).
var unitTypes = []string{"service", "socket", "device", "mount", "automount", "swap", "target", "path", "timer", "slice", "scope"}

// validUnitName is systemd's unit_name_is_valid, without its checks of
// template instances: at most 255 bytes of [A-Za-z0-9:_.\@-], a prefix and
// a unit type.
func validUnitName(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(":-_.\\@", c) >= 0) {
			return false
		}
	}
	dot := strings.LastIndexByte(s, '.')
	return dot > 0 && slices.Contains(unitTypes, s[dot+1:])
}

// Plan edits config.toml and enables the fuse-overlayfs unit when needed.
func Plan(f Facts) ([]plan.Action, error) {
	// The variable's value, checked before anything else: the problem is
	// the variable's, whatever config.toml holds (or if it is missing).
	if err := checkSnapshotterName(f.Snapshotter); err != nil {
		return nil, fmt.Errorf("%s: %w", SnapshotterEnv, err)
	}
	var actions []plan.Action
	switch {
	case f.PermitMountsInUserNS:
		// Debian 10 and 11 kernels allow overlayfs in a user namespace with
		// a patch known to be unstable (moby/moby#42302).
		actions = append(actions, plan.Info("UserNS: kernel seems supporting overlayfs with permit_mounts_in_userns, but avoiding due to instability."))
	case f.OverlayErr != nil:
		actions = append(actions, plan.Info("UserNS: kernel does not seem to support overlayfs."))
	case f.SELinux:
		// Before Linux 5.13 overlayfs in a user namespace breaks under
		// enforcing SELinux (torvalds/linux@7fa2e79a6bb9).
		actions = append(actions, plan.Warning("UserNS: SELinux might be Enforcing. If you see an error related to overlayfs, try setting `KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=fuse-overlayfs` ."))
	}

	ch := Change{Snapshotter: f.Snapshotter, RestrictOOMScoreAdj: f.UserNS}
	if ch == (Change{}) {
		return actions, nil
	}
	if f.Config == nil {
		return actions, fmt.Errorf("%s: %w", ConfigPath, fs.ErrNotExist)
	}
	res, err := Edit(f.Config, ch)
	if err != nil {
		return actions, fmt.Errorf("%s: %w", ConfigPath, err)
	}
	if f.Snapshotter != "" {
		if res.OldSnapshotter != f.Snapshotter {
			old := cmp.Or(res.OldSnapshotter, "overlayfs")
			actions = append(actions, plan.Info("changing snapshotter from "+logline.QuoteClipped(old)+" to "+logline.QuoteClipped(f.Snapshotter)))
		} else {
			actions = append(actions, plan.Info("snapshotter is already "+logline.QuoteClipped(f.Snapshotter)))
		}
	}
	if res.Changed {
		actions = append(actions, shownMasked(plan.WriteFile(ConfigPath, res.Config, f.ConfigMode)).
			Because(describeChange(ch)))
	}
	if f.Snapshotter == "fuse-overlayfs" {
		actions = append(actions, plan.Info("enabling containerd-fuse-overlayfs service"))
		if f.FuseUnitPath == "" {
			return actions, fmt.Errorf("%s: unit not found in %s", FuseUnit, strings.Join(unitDirs, ", "))
		}
		for _, link := range slices.Sorted(maps.Keys(f.FuseLinks)) {
			actions = append(actions,
				plan.Mkdir(path.Dir(link), 0o755),
				plan.Symlink(f.FuseLinks[link], link).Because("systemctl enable "+FuseUnit))
		}
	}
	return actions, nil
}

// shownMasked is a write of config.toml as the plan shows it: with its
// credentials masked (Redact), or, should the edited config not scan
// (Edit verified that it decodes), by its size alone.
func shownMasked(w plan.Action) plan.Action {
	masked, n, err := Redact(w.Data)
	switch {
	case err != nil:
		return w.Secret()
	case n > 0:
		return w.ShownMasked(masked)
	}
	return w
}

func describeChange(ch Change) string {
	var parts []string
	if ch.Snapshotter != "" {
		parts = append(parts, "snapshotter "+ch.Snapshotter)
	}
	if ch.RestrictOOMScoreAdj {
		parts = append(parts, "restrict_oom_score_adj in a user namespace")
	}
	return strings.Join(parts, ", ")
}
