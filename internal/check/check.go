package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/containerd"
	"github.com/kind-entrypoint/entrypoint/internal/identity"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/userns"
)

// Status is a row's verdict.
type Status string

const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Row is one requirement.
type Row struct {
	Name     string `json:"name"`
	Status   Status `json:"status"`
	Observed string `json:"observed"`
	Hint     string `json:"hint"`
}

// Exit codes: the worst status of the rows.
const (
	ExitPass = 0
	ExitWarn = 1
	ExitFail = 2
	// ExitUsage: check could not run (bad flags, no such --root).
	ExitUsage = 3
)

// ExitCode is 0 when every row passes, 1 when some warn and none fails, 2
// when one fails.
func ExitCode(rows []Row) int {
	code := ExitPass
	for _, r := range rows {
		switch r.Status {
		case Fail:
			return ExitFail
		case Warn:
			code = ExitWarn
		}
	}
	return code
}

// Options say what to check.
type Options struct {
	// Sys is the host: system.Linux, or a system.Tree for --root. A
	// capture.Recorder is used as it is (so that a capture records what
	// the rows read); any other is wrapped in one.
	Sys       system.System
	LookupEnv func(string) (string, bool)
	// Live: Sys is this machine, not a replayed tree; /dev/fuse must then
	// be a character device, not just exist.
	Live bool
	// PodNetwork, when set, runs the pod-network preflight
	// (podnet.Preflight): a summary, or why it failed.
	PodNetwork func(ctx context.Context) (string, error)
	// ProbeTimeout limits each probe; 0 means the entrypoint's 5 s.
	ProbeTimeout time.Duration
}

// Report is a check's outcome.
type Report struct {
	Rows []Row
	// Dry is the one dry run the rows were built from (every step
	// planned, even after a fatal one): what capture archives as the
	// host's plan.
	Dry boot.Dry
}

// Run checks the host. It never fails: what cannot be read is a row.
func Run(ctx context.Context, o Options) Report {
	timeout := o.ProbeTimeout
	if timeout <= 0 {
		timeout = network.ProbeTimeout
	}
	c := &checker{sys: o.Sys, live: o.Live, timeout: timeout}
	var rep Report
	rep.Dry = boot.DryRunOn(ctx, o.Sys, o.LookupEnv, boot.Steps(), boot.DryRunOptions{ProbeTimeout: o.ProbeTimeout, Every: true})
	if err := rep.Dry.DetectErr; err != nil {
		rep.Rows = append(rep.Rows, Row{"detect", Fail, err.Error(),
			"the entrypoint cannot tell the user namespace or the cgroup version: fix the file named"})
		if o.PodNetwork != nil {
			rep.Rows = append(rep.Rows, c.podNetwork(ctx, o.PodNetwork))
		}
		return rep
	}
	c.h, c.results = rep.Dry.Host, rep.Dry.Results
	c.mi, c.miErr = c.h.MountTable()
	c.kind = c.exists("/kind")
	comm, _ := c.sys.ReadFile("/proc/1/comm", system.LimitValue)
	c.booted = c.kind && strings.TrimSpace(string(comm)) == "systemd"

	rows := []Row{c.userNS(), c.cgroupVersion(), c.cgroupNS(), c.controllers(), c.cgroupMounts(), c.nofile()}
	rows = append(rows, c.storage()...)
	rows = append(rows, c.sysMount(), c.propagation())
	rows = append(rows, c.iptables()...)
	rows = append(rows, c.names()...)
	rows = append(rows, c.dmi(), c.libModules(), c.plan(rep.Dry.Shown(), rep.Dry.Err))
	if o.PodNetwork != nil {
		rows = append(rows, c.podNetwork(ctx, o.PodNetwork))
	}
	rep.Rows = rows
	return rep
}

type checker struct {
	sys     system.System
	h       *boot.Host
	results []boot.Result
	live    bool
	timeout time.Duration
	mi      []*mountinfo.Info
	miErr   error
	// kind: /kind exists (a node image); booted: and systemd is PID 1,
	// so the entrypoint has run.
	kind, booted bool
}

// unreadableHint is the hint of a row whose input could not be read at
// all: what it says is that error, not a finding about the host.
const unreadableHint = "the entrypoint cannot get past this either: fix what the error names (entrypoint --dry-run shows where it stops)"

// failRows are the rows names, each failing with err: what a group of
// rows says when the facts they all come from could not be detected.
// Every row is there still, so a host that cannot be read has the rows,
// in order, of one that can.
func failRows(err error, hint string, names ...string) []Row {
	rows := make([]Row, 0, len(names))
	for _, n := range names {
		rows = append(rows, Row{n, Fail, err.Error(), hint})
	}
	return rows
}

// tableRow is the row named name of a check that reads the mount table,
// when the table could not be read: "nothing mounted" would blame the
// host for a file that could not be used.
func (c *checker) tableRow(name string) (Row, bool) {
	if c.miErr == nil {
		return Row{}, false
	}
	return Row{name, Fail, c.miErr.Error(), unreadableHint}, true
}

func (c *checker) exists(p string) bool {
	_, err := c.sys.Stat(p)
	return err == nil
}

func (c *checker) userNS() Row {
	if !c.h.UserNS {
		return Row{"user-namespace", Pass, "no (uid_map is the full identity map)", ""}
	}
	m, _ := c.sys.ReadFile("/proc/self/uid_map", system.LimitConfig)
	return Row{"user-namespace", Pass, "yes (rootless): uid_map " + strings.Join(strings.Fields(string(m)), " "),
		"kind in a user namespace is experimental: see kind's rootless guide (cgroup v2 with delegation, RLIMIT_NOFILE, fuse-overlayfs)"}
}

func (c *checker) cgroupVersion() Row {
	if c.h.CgroupV2 {
		return Row{"cgroup-version", Pass, "v2 (unified)", ""}
	}
	obs := "v1 (legacy)"
	if m := system.Top(c.mi, cgroupfix.Root+"/unified"); m != nil && m.FSType == "cgroup2" {
		obs = "v1 (hybrid: cgroup2 also at " + cgroupfix.Root + "/unified)"
	}
	return Row{"cgroup-version", Warn, obs,
		"Kubernetes keeps cgroup v1 in maintenance mode (1.31+) and newer kubelets refuse it unless failCgroupV1 is false: boot the host with cgroup v2 (systemd.unified_cgroup_hierarchy=1)"}
}

func (c *checker) cgroupNS() Row {
	const name = "cgroupns"
	if c.h.CgroupV2 {
		if r, ok := c.tableRow(name); ok {
			return r
		}
		m := system.Top(c.mi, cgroupfix.Root)
		switch {
		case m == nil:
			return Row{name, Fail, "nothing mounted at " + cgroupfix.Root, "run the node --privileged (kind does)"}
		case m.Root == "/":
			// The mount shows the namespace's root. (A privileged
			// container in the host's cgroup namespace would show the
			// host's root too; kind never makes one, and Docker's
			// default on v2 is private.)
			self, _ := cgroupfix.ReadSelfCgroup(c.sys)
			return Row{name, Pass, "yes (" + cgroupfix.Root + " is mounted at the namespace's root; this process is in " +
				self.Unified() + ")", ""}
		}
		return Row{name, Warn, "no: " + cgroupfix.Root + " shows the host's hierarchy at " + m.Root,
			"create the node with --cgroupns=private (kind v0.20+ does)"}
	}
	f, err := boot.FactsOf[cgroupfix.V1Facts](c.results, "fix_cgroup")
	if err != nil {
		return Row{name, Fail, err.Error(), "the entrypoint cannot find the container's cgroup: see /proc/self/cgroup"}
	}
	if f.Current == "/" {
		return Row{name, Pass, "yes (the container's cgroup is /)", ""}
	}
	return Row{name, Warn, "no: the container's cgroup is " + f.Current + " (the entrypoint re-binds every hierarchy)",
		"create the node with --cgroupns=private (kind v0.20+ does; Docker 20.10+ or Podman), or use cgroup v2"}
}

// v1Controllers are the cgroup v1 controllers, as mount options name them
// (the other options of a v1 mount are flags: xattr, name=systemd, ...).
var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "net_prio",
	"blkio", "perf_event", "hugetlb", "pids", "rdma", "misc", "debug"}

// cgroupV1Controllers lists the controllers of the v1 hierarchies mounted
// under /sys/fs/cgroup.
func (c *checker) cgroupV1Controllers() []string {
	var out []string
	for _, m := range c.mi {
		if m.FSType != "cgroup" || !strings.HasPrefix(m.Mountpoint, cgroupfix.Root+"/") {
			continue
		}
		for _, o := range strings.Split(m.VFSOptions, ",") {
			if slices.Contains(v1Controllers, o) && !slices.Contains(out, o) {
				out = append(out, o)
			}
		}
	}
	return out
}

func (c *checker) controllers() Row {
	const name = "cgroup-controllers"
	var have []string
	if c.h.CgroupV2 {
		controllers, err := cgroupfix.ReadControllers(c.sys)
		if err != nil {
			return Row{name, Fail, err.Error(), "run the node --privileged (kind does)"}
		}
		have = strings.Fields(controllers)
	} else {
		if r, ok := c.tableRow(name); ok {
			return r
		}
		have = c.cgroupV1Controllers()
	}
	obs := strings.Join(have, " ")
	if obs == "" {
		obs = "none"
	}
	if c.h.UserNS && c.h.CgroupV2 {
		obs += " (delegated to this user namespace)"
	}
	if missing := userns.Missing(strings.Join(have, " ")); len(missing) > 0 {
		hint := "the kubelet needs the cpu, memory and pids controllers"
		if c.h.UserNS {
			hint = "delegate them to the user: a systemd drop-in for user@.service with Delegate=cpu cpuset io memory pids (kind's rootless guide); the entrypoint stops with \"" +
				userns.MissingError(missing).Error() + "\""
		}
		return Row{name, Fail, obs + "; missing " + strings.Join(missing, ", "), hint}
	}
	if !slices.Contains(have, "cpuset") {
		return Row{name, Warn, obs + "; missing cpuset",
			"the kubelet checks for the cpuset controller too: delegate or enable it (Delegate=cpu cpuset io memory pids)"}
	}
	return Row{name, Pass, obs, ""}
}

func (c *checker) cgroupMounts() Row {
	const name = "cgroup-mounts"
	if r, ok := c.tableRow(name); ok {
		return r
	}
	// A set, not a list searched for each mount: a table of 70k cgroup
	// mounts took a minute (issue 24).
	rw := map[string]struct{}{}
	var ro []string
	for _, m := range c.mi {
		if (m.FSType != "cgroup" && m.FSType != "cgroup2") || (m.Mountpoint != cgroupfix.Root && !strings.HasPrefix(m.Mountpoint, cgroupfix.Root+"/")) {
			continue
		}
		if system.IsReadOnly(m) {
			ro = append(ro, m.Mountpoint)
		} else {
			rw[m.Mountpoint] = struct{}{}
		}
	}
	switch {
	case len(rw) == 0 && len(ro) == 0:
		return Row{name, Fail, "no cgroup filesystem under " + cgroupfix.Root, "run the node --privileged (kind does)"}
	case len(ro) > 0:
		return Row{name, Fail, "read-only: " + joinClipped(ro, maxListed),
			"systemd and the kubelet create cgroups: run the node --privileged (kind does)"}
	}
	return Row{name, Pass, fmt.Sprintf("%d writable", len(rw)), ""}
}

func (c *checker) nofile() Row {
	n, err := c.sys.NofileHard()
	if err != nil {
		return Row{"nofile", Fail, err.Error(), unreadableHint}
	}
	obs := "hard RLIMIT_NOFILE " + strconv.FormatUint(n, 10)
	if n == ^uint64(0) {
		obs = "hard RLIMIT_NOFILE unlimited"
	}
	if n < userns.MinNofile {
		return Row{"nofile", Warn, obs, fmt.Sprintf(
			"containerd and the kubelet open many files; raise the hard limit to at least %d (rootless: LimitNOFILE in the engine's unit, or /etc/security/limits.conf)", userns.MinNofile)}
	}
	return Row{"nofile", Pass, obs, ""}
}

// storage is the rows of /kind's and containerd's filesystems, the
// snapshotter that follows, overlay, and /dev/fuse.
func (c *checker) storage() []Row {
	cf, err := boot.FactsOf[containerd.Facts](c.results, "configure_containerd")
	if err != nil {
		rows := failRows(err, unreadableHint, "fs-kind", "fs-containerd")
		rows = append(rows, failRows(err, "configure_containerd cannot choose a snapshotter", "snapshotter")...)
		return append(rows, failRows(err, unreadableHint, "overlay", "dev-fuse")...)
	}
	snap, source := cf.Snapshotter, cf.SnapshotterSource
	if snap == "" {
		res, err := containerd.Edit(cf.Config, containerd.Change{})
		switch {
		case cf.Config == nil:
			snap, source = "overlayfs", "containerd's default: no "+containerd.ConfigPath
		case err != nil:
			snap, source = "overlayfs", fmt.Sprintf("containerd's default; %s: %v", containerd.ConfigPath, err)
		case res.OldSnapshotter == "":
			snap, source = "overlayfs", "containerd's default, no snapshotter in "+containerd.ConfigPath
		default:
			snap, source = res.OldSnapshotter, "set in "+containerd.ConfigPath
		}
	}
	rows := []Row{c.fsKind(cf.KindFSType, snap), c.fsContainerd(snap),
		{"snapshotter", Pass, snap + " (" + source + ")", ""}}
	return append(rows, c.overlay(cf, snap), c.devFuse(snap))
}

func (c *checker) fsKind(fstype, snap string) Row {
	const name = "fs-kind"
	obs := "/kind is on " + fstype
	switch {
	case !c.kind:
		return Row{name, Warn, "no /kind: not a kind node image",
			"run check in the node image: docker run --rm --privileged --entrypoint /usr/local/bin/entrypoint IMAGE check"}
	case fstype == "zfs":
		return Row{name, Warn, obs + ": snapshotter " + snap,
			"the native snapshotter copies every layer (slow, large); OpenZFS 2.2+ supports overlayfs: set KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=overlayfs to use it"}
	case fstype == "aufs":
		return Row{name, Warn, obs, "aufs is long deprecated in Docker: switch the engine to overlay2"}
	case fstype == "fuseblk":
		return Row{name, Pass, obs + " (FUSE): snapshotter " + snap, ""}
	}
	return Row{name, Pass, obs, ""}
}

// fsType is the filesystem of p, or of its nearest existing parent.
func (c *checker) fsType(p string) (string, string, error) {
	for {
		t, err := c.sys.FSType(p)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || p == "/" {
			return t, p, err
		}
		p = path.Dir(p)
	}
}

func (c *checker) fsContainerd(snap string) Row {
	const name = "fs-containerd"
	const dir = "/var/lib/containerd"
	t, at, err := c.fsType(dir)
	if err != nil {
		return Row{name, Fail, err.Error(), unreadableHint}
	}
	obs := dir + " is on " + t
	if at != dir {
		obs = fmt.Sprintf("%s does not exist yet; %s is on %s", dir, at, t)
	}
	if (t == "overlayfs" || t == "aufs") && snap == "overlayfs" {
		return Row{name, Fail, obs,
			"the overlayfs snapshotter cannot put its layers on " + t + ": give the node a volume for /var (kind does)"}
	}
	return Row{name, Pass, obs, ""}
}

func (c *checker) overlay(cf containerd.Facts, snap string) Row {
	const name = "overlay"
	switch {
	case cf.PermitMountsInUserNS:
		return Row{name, Warn, "not tried: the kernel has Debian's permit_mounts_in_userns patch, known to be unstable (moby/moby#42302); snapshotter " + snap,
			"the entrypoint avoids overlayfs here: fuse-overlayfs needs /dev/fuse (see dev-fuse)"}
	case cf.UserNS && cf.OverlayErr == nil && cf.SELinux:
		return Row{name, Warn, "mounts in this user namespace, under an SELinux label",
			"before Linux 5.13 overlayfs in a user namespace fails under enforcing SELinux: if pods fail to start, set KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=fuse-overlayfs"}
	}
	err := cf.OverlayErr
	if !cf.OverlayTried {
		err = c.sys.OverlayTrial()
	}
	if err == nil {
		return Row{name, Pass, "a trial overlay mount works", ""}
	}
	obs := "a trial overlay mount fails: " + err.Error()
	if tmp, _, terr := c.fsType("/tmp"); terr == nil && (tmp == "overlayfs" || tmp == "aufs") {
		// The trial's upper layer is under /tmp: on overlay, it fails
		// whatever containerd's own directory would do.
		return Row{name, Warn, obs + " (its upper layer was on /tmp, itself on " + tmp + ")",
			"run the node with a tmpfs /tmp (kind does) and check again"}
	}
	if snap == "overlayfs" {
		return Row{name, Fail, obs + "; the snapshotter is overlayfs",
			"set KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=fuse-overlayfs (and give the node /dev/fuse), or native"}
	}
	return Row{name, Warn, obs + "; the snapshotter is " + snap + ", which does not need it",
		"nothing to do unless you set the snapshotter to overlayfs"}
}

func (c *checker) devFuse(snap string) Row {
	const name = "dev-fuse"
	if snap != "fuse-overlayfs" {
		return Row{name, Pass, "not needed (snapshotter " + snap + ")", ""}
	}
	hint := "the fuse-overlayfs snapshotter needs /dev/fuse: create the node with --device /dev/fuse (kind does for rootless and Podman)"
	fi, err := c.sys.Stat("/dev/fuse")
	switch {
	case err != nil:
		return Row{name, Fail, "missing, and the snapshotter is fuse-overlayfs", hint}
	case c.live && fi.Mode()&fs.ModeCharDevice == 0:
		return Row{name, Fail, "/dev/fuse is not a character device (" + fi.Mode().Type().String() + ")", hint}
	}
	return Row{name, Pass, "present (snapshotter fuse-overlayfs)", ""}
}

func (c *checker) sysMount() Row {
	const name = "sys"
	if r, ok := c.tableRow(name); ok {
		return r
	}
	m := system.Top(c.mi, "/sys")
	if m == nil {
		return Row{name, Fail, "nothing mounted at /sys", "systemd and the kubelet need sysfs: run the node --privileged (kind does)"}
	}
	superRO := strings.HasPrefix(m.VFSOptions, "ro")
	switch {
	case superRO:
		return Row{name, Warn, "the sysfs superblock is read-only (" + m.VFSOptions + ")",
			"a plain remount,ro of /sys changed it for every namespace sharing it, the host's /sys included: remount it rw on the host (mount -o remount,rw /sys); the entrypoint only makes its own mount read-only"}
	case system.IsReadOnly(m):
		return Row{name, Pass, "read-only for this container (" + m.Options + ")", ""}
	case c.booted:
		return Row{name, Warn, "writable, although the node has booted",
			"fix_mount makes /sys read-only before systemd starts: see the entrypoint's log (docker logs NODE)"}
	}
	return Row{name, Pass, "writable; fix_mount makes it read-only for systemd, per mount", ""}
}

func (c *checker) propagation() Row {
	const name = "mount-propagation"
	if r, ok := c.tableRow(name); ok {
		return r
	}
	root := system.Top(c.mi, "/")
	if root == nil {
		return Row{name, Fail, "no mount at / in mountinfo", ""}
	}
	obs := "/ is " + propagationOf(root)
	if system.AllShared(c.mi, cgroupfix.Root) {
		return Row{name, Pass, obs + ", and every mount outside " + cgroupfix.Root, ""}
	}
	if c.booted {
		return Row{name, Warn, obs + ", not every mount is shared, although the node has booted",
			"the kubelet's Bidirectional volumes need shared mounts: fix_mount makes / rshared (see docker logs NODE)"}
	}
	return Row{name, Pass, obs + "; fix_mount makes / recursively shared", ""}
}

func propagationOf(m *mountinfo.Info) string {
	var shared, master bool
	for _, f := range strings.Fields(m.Optional) {
		shared = shared || strings.HasPrefix(f, "shared:")
		master = master || strings.HasPrefix(f, "master:")
	}
	switch {
	case shared && master:
		return "shared and slave"
	case shared:
		return "shared"
	case master:
		return "slave"
	}
	return "private"
}

// iptables is a row per backend and one for the mode chosen.
func (c *checker) iptables() []Row {
	f, err := boot.FactsOf[network.IptablesFacts](c.results, "select_iptables")
	if err != nil {
		return failRows(err, unreadableHint, "iptables-legacy", "iptables-nft", "iptables-mode")
	}
	var rows []Row
	works := false
	for _, mode := range []network.Mode{network.Legacy, network.NFT} {
		var parts []string
		total, ok, missing, broken := 0, 0, 0, 0
		for _, s := range f.Saves {
			if s.Mode != mode {
				continue
			}
			switch {
			case s.NotRun != "":
				ok++
				parts = append(parts, fmt.Sprintf("%s not run: %s", s.Command, s.NotRun))
			case s.Err == nil:
				ok++
				total += s.Rules
				parts = append(parts, fmt.Sprintf("%s %d", s.Command, s.Rules))
			case system.NotInstalled(s.Err):
				missing++
				parts = append(parts, s.Command+" not installed")
			default:
				broken++
				parts = append(parts, fmt.Sprintf("%s failed: %v", s.Command, s.Err))
			}
		}
		works = works || ok > 0
		name := "iptables-" + string(mode)
		obs := fmt.Sprintf("%d rules (%s)", total, strings.Join(parts, "; "))
		switch {
		case broken > 0:
			rows = append(rows, Row{name, Warn, obs, "a failing or hanging " + string(mode) +
				" iptables-save (often a kernel and nftables userspace mismatch) counts 0 rules and delays every boot"})
		case ok == 0:
			rows = append(rows, Row{name, Warn, "not installed", "the node image ships both backends (iptables-legacy-save, iptables-nft-save)"})
		default:
			rows = append(rows, Row{name, Pass, obs, ""})
		}
	}
	legacy, nft := f.Counts()
	mode := f.Mode()
	obs := fmt.Sprintf("%s (legacy %d rules, nft %d rules)", mode, legacy, nft)
	if legacy == nft {
		obs = fmt.Sprintf("%s (legacy %d rules, nft %d rules: legacy wins a tie)", mode, legacy, nft)
	}
	switch {
	case !works:
		rows = append(rows, Row{"iptables-mode", Fail, "no iptables-save works",
			"kube-proxy, the CNI plugin and the entrypoint's DNS rules need iptables"})
	case legacy > 0 && nft > 0:
		rows = append(rows, Row{"iptables-mode", Warn, obs,
			"both backends hold rules: the one with more is chosen, and rules written to the other are not seen by the node; make the host use one"})
	default:
		rows = append(rows, Row{"iptables-mode", Pass, obs, ""})
	}
	return rows
}

func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || system.TimedOut(err)
}

// names is the rows of enable_network_magic's lookups: the Docker host, the
// node's own name, the default gateway.
func (c *checker) names() []Row {
	names := []string{"host-docker-internal", "node-name", "default-gateway"}
	if _, err := boot.FactsOf[network.IptablesFacts](c.results, "select_iptables"); err != nil {
		// enable_network_magic decides from its answers.
		return failRows(fmt.Errorf("not looked at: %w", err), "see iptables-mode", names...)
	}
	f, err := boot.FactsOf[network.MagicFacts](c.results, "enable_network_magic")
	if err != nil {
		return failRows(err, unreadableHint, names...)
	}
	gw := f.Gateway.IsValid()
	docker := network.UsableHostIP(f.DockerHost)
	var rows []Row

	const hdi = "host-docker-internal"
	switch {
	case errors.Is(f.DockerHostErr, network.ErrDockerHostNotNeeded):
		rows = append(rows, Row{hdi, Pass, "not needed: the node does not use Docker's embedded DNS", ""})
	case docker:
		rows = append(rows, Row{hdi, Pass, f.DockerHost.String() + ": pods use the host's DNS through it", ""})
	case timedOut(f.DockerHostErr):
		rows = append(rows, Row{hdi, Warn, fmt.Sprintf("%v", f.DockerHostErr),
			"the lookup delays every boot by its timeout: fix the node's DNS (/etc/resolv.conf)"})
	case gw:
		obs := fmt.Sprintf("not found (%v)", f.DockerHostErr)
		if f.DockerHost.IsValid() {
			obs = f.DockerHost.String() + " is loopback, not the host"
			if !f.DockerHost.IsLoopback() {
				obs = f.DockerHost.String() + " names no host"
			}
		}
		rows = append(rows, Row{hdi, Pass, obs + "; the default gateway " + f.Gateway.String() + " is used instead", ""})
	default:
		rows = append(rows, Row{hdi, Warn, fmt.Sprintf("not usable (%v), and no default gateway", f.DockerHostErr),
			"pods cannot reach Docker's DNS: give the node a default route, or --add-host=host.docker.internal:host-gateway"})
	}

	const nn = "node-name"
	obs := fmt.Sprintf("%s: IPv4 %s, IPv6 %s", f.Hostname, addrOrWhy(f.IPv4.String(), f.IPv4.IsValid(), f.IPv4Err), addrOrWhy(f.IPv6.String(), f.IPv6.IsValid(), f.IPv6Err))
	switch {
	case f.Hostname == "":
		rows = append(rows, Row{nn, Warn, "the node has no hostname", "kind names each node: check the container's --hostname"})
	case !f.IPv4.IsValid() && f.OldIPv4 != nil:
		rows = append(rows, Row{nn, Fail, fmt.Sprintf("%s; the last boot recorded IPv4 %s", obs, *f.OldIPv4),
			"the entrypoint stops: it cannot follow the address change. The node's name must resolve to its address (Docker's embedded DNS, /etc/hosts)"})
	case timedOut(f.IPv4Err) || timedOut(f.IPv6Err):
		rows = append(rows, Row{nn, Warn, obs, "the lookup delays every boot by its timeout: fix the node's DNS (/etc/resolv.conf)"})
	case !f.IPv4.IsValid() && !f.IPv6.IsValid():
		rows = append(rows, Row{nn, Warn, obs,
			"the node's name must resolve to its own address (not loopback) for the entrypoint to follow an address change after a restart"})
	case !f.IPv6.IsValid() && f.OldIPv6 != nil:
		rows = append(rows, Row{nn, Warn, fmt.Sprintf("%s; the last boot recorded IPv6 %s", obs, *f.OldIPv6),
			"the node's files keep the old IPv6 address"})
	default:
		rows = append(rows, Row{nn, Pass, obs, ""})
	}

	const dg = "default-gateway"
	switch {
	case gw:
		rows = append(rows, Row{dg, Pass, f.Gateway.String(), ""})
	case docker:
		rows = append(rows, Row{dg, Pass, fmt.Sprintf("none (%v); host.docker.internal is used", f.GatewayErr), ""})
	default:
		rows = append(rows, Row{dg, Warn, fmt.Sprintf("none (%v)", f.GatewayErr),
			"without a default route (an internal network) nor host.docker.internal, the DNS rules and resolv.conf are left as they are"})
	}
	return rows
}

func addrOrWhy(addr string, ok bool, err error) string {
	if ok {
		return addr
	}
	if err != nil {
		return "none (" + err.Error() + ")"
	}
	return "none"
}

func (c *checker) dmi() Row {
	const name = "dmi"
	pn, err := boot.FactsOf[identity.ProductNameFacts](c.results, "fix_product_name")
	if err != nil {
		return Row{name, Fail, err.Error(), unreadableHint}
	}
	pu, err := boot.FactsOf[identity.ProductUUIDFacts](c.results, "fix_product_uuid")
	if err != nil {
		return Row{name, Fail, err.Error(), unreadableHint}
	}
	var parts []string
	found := false
	for _, d := range append([]identity.DMIFile{pn.DMI}, pu.DMI...) {
		v := "absent"
		if d.Exists {
			found = true
			v = "present"
			if d.Target != d.Path {
				v += " (-> " + d.Target + ")"
			}
			if d.Bound {
				v += ", faked already"
			}
		}
		parts = append(parts, d.Path+" "+v)
	}
	obs := strings.Join(parts, "; ")
	if pu.Current != nil && pu.NewUUID != "" {
		return Row{name, Warn, obs + fmt.Sprintf("; %s is not a UUID", identity.ProductUUID),
			"fix_product_uuid replaces it with a new UUID: the node's system UUID changes"}
	}
	if !found {
		return Row{name, Pass, "no DMI files (WSL2, some VMs): nothing to fake", ""}
	}
	return Row{name, Pass, obs, ""}
}

func (c *checker) libModules() Row {
	const name = "lib-modules"
	hint := "kind mounts the host's /lib/modules read-only: kube-proxy (ipvs) and some CNI plugins load kernel modules"
	fi, err := c.sys.Stat("/lib/modules")
	if err != nil || !fi.IsDir() {
		return Row{name, Warn, "missing", hint}
	}
	rel, err := c.sys.ReadFile("/proc/sys/kernel/osrelease", system.LimitValue)
	release := strings.TrimSpace(string(rel))
	if err != nil || release == "" {
		return Row{name, Pass, "present; the running kernel is unknown (no /proc/sys/kernel/osrelease)", ""}
	}
	if _, err := c.sys.Stat("/lib/modules/" + release); err != nil {
		return Row{name, Warn, "no modules for the running kernel " + release, hint + " (modules built into the kernel need none)"}
	}
	return Row{name, Pass, "/lib/modules/" + release, ""}
}

// plan is the row of the dry run: would the entrypoint get to init?
func (c *checker) plan(results []boot.Result, planErr error) Row {
	const name = "plan"
	var se *boot.StepError
	if errors.As(planErr, &se) {
		return Row{name, Fail, fmt.Sprintf("step %s would stop the entrypoint (exit %d): %v", se.Step, se.Code, se.Err),
			"entrypoint --dry-run shows the whole plan"}
	}
	if planErr != nil {
		return Row{name, Fail, planErr.Error(), "entrypoint --dry-run shows the whole plan"}
	}
	changes := 0
	var warnings []string
	for _, r := range results {
		changes += plan.CountChanges(r.Actions)
		for _, a := range r.Actions {
			if a.Op == plan.OpLog && (a.Level == logline.Warn || a.Level == logline.Error) {
				warnings = append(warnings, fmt.Sprintf("%s: %s: %s", r.Step, a.Level, a.Data))
			}
		}
	}
	obs := fmt.Sprintf("%d steps, %d changes to make", len(results), changes)
	if len(warnings) > 0 {
		return Row{name, Warn, obs + "; " + strings.Join(warnings[:min(len(warnings), maxListed)], "; ") + clippedCount(len(warnings), maxListed),
			"the rows above say why; entrypoint --dry-run shows the whole plan"}
	}
	return Row{name, Pass, obs, ""}
}

func (c *checker) podNetwork(ctx context.Context, run func(context.Context) (string, error)) Row {
	const name = "pod-network"
	summary, err := run(ctx)
	if err != nil {
		return Row{name, Fail, err.Error(),
			"a pod on this node would not get a working network: check the firewall (INPUT/OUTPUT), rp_filter and that the node has an address"}
	}
	return Row{name, Pass, summary, ""}
}

// WriteText prints the rows as a table, hints under the rows that need
// them, then the verdict.
func WriteText(w io.Writer, rows []Row) error {
	width := 0
	for _, r := range rows {
		width = max(width, len(r.Name))
	}
	var b bytes.Buffer
	counts := map[Status]int{}
	for _, r := range rows {
		counts[r.Status]++
		// Observed quotes the host (paths, file contents, errors):
		// one line each, whatever it holds.
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", r.Status, width, r.Name, logline.Escape(r.Observed))
		if r.Hint != "" && r.Status != Pass {
			fmt.Fprintf(&b, "%-4s  %-*s  hint: %s\n", "", width, "", logline.Escape(r.Hint))
		}
	}
	fmt.Fprintf(&b, "%d pass, %d warn, %d fail: exit %d\n", counts[Pass], counts[Warn], counts[Fail], ExitCode(rows))
	_, err := w.Write(b.Bytes())
	return err
}

// WriteJSON prints the rows as one JSON array.
func WriteJSON(w io.Writer, rows []Row) error {
	if rows == nil {
		rows = []Row{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}
