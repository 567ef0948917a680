package boot

import (
	"cmp"
	"context"
	"crypto/rand"
	"slices"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/containerd"
	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/identity"
	"github.com/kind-entrypoint/entrypoint/internal/mounts"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/proxy"
	"github.com/kind-entrypoint/entrypoint/internal/userns"
)

// Steps is the entrypoint, in the reference script's order; the order
// matters (configure* first, so nothing reads the configs half-made;
// select_iptables before enable_network_magic, which edits the rules of
// the backend it chose). A step's exit code is 10 + its position (1-based).
// Each step records what it detected in its field of Host.State.
func Steps() []Step {
	steps := []Step{
		{Name: "validate_userns", Plan: validateUserNS},
		{Name: "configure_containerd", Plan: configureContainerd},
		{Name: "configure_proxy", Plan: configureProxy},
		{Name: "fix_mount", Plan: fixMount},
		{Name: "fix_cgroup", Plan: fixCgroup},
		{Name: "fix_machine_id", Plan: fixMachineID},
		{Name: "fix_product_name", Plan: fixProductName},
		{Name: "fix_product_uuid", Plan: fixProductUUID},
		{Name: "select_iptables", Plan: selectIptables,
			Prefetch: func(ctx context.Context, h *Host) { h.netProbes().StartSaves(ctx) }},
		{Name: "enable_network_magic", Plan: enableNetworkMagic,
			Prefetch: func(ctx context.Context, h *Host) { h.netProbes().StartNames(ctx) },
			Ahead: func(ctx context.Context, h *Host) (plan.Action, bool) {
				return h.netProbes().DNSRestoreAhead(ctx, h.LookupEnv)
			}},
	}
	for i := range steps {
		steps[i].Code = 11 + i
	}
	return steps
}

func validateUserNS(_ context.Context, h *Host) (Planned, error) {
	if !h.State.UserNS {
		return Planned{}, nil
	}
	var controllers func() (string, error)
	if h.State.CgroupV2 {
		controllers = func() (string, error) { return cgroupfix.ReadControllers(h.Sys) }
	}
	f, err := userns.Detect(h.Sys, controllers)
	if h.State.Rootless = found(f, err); err != nil {
		return Planned{}, err
	}
	facts := []Fact{{"RLIMIT_NOFILE hard", strconv.FormatUint(f.NofileHard, 10)}}
	if h.State.CgroupV2 {
		facts = append(facts, Fact{"cgroup controllers", f.Controllers})
	}
	actions, err := userns.Plan(f)
	return Planned{facts, actions}, err
}

func configureContainerd(_ context.Context, h *Host) (Planned, error) {
	f, err := containerd.Detect(h.Sys, h.Getenv, h.State.UserNS)
	if h.State.Containerd = found(f, err); err != nil {
		return Planned{}, err
	}
	facts := []Fact{
		{"filesystem of /kind", f.KindFSType},
		{"snapshotter", strings.TrimSpace(f.Snapshotter + " (" + f.SnapshotterSource + ")")},
	}
	actions, err := containerd.Plan(f)
	return Planned{facts, actions}, err
}

func configureProxy(_ context.Context, h *Host) (Planned, error) {
	f, err := proxy.Detect(h.Sys, h.LookupEnv)
	if h.State.Proxy = found(f, err); err != nil {
		return Planned{}, err
	}
	actions, err := proxy.Plan(f)
	return Planned{nil, actions}, err
}

func fixMount(_ context.Context, h *Host) (Planned, error) {
	f, err := mounts.Detect(h.Sys, h.Getenv("PATH"), h.mounts)
	if h.State.Mounts = found(f, err); err != nil {
		return Planned{}, err
	}
	sys := "nothing mounted"
	if f.Sys != nil {
		sys = f.Sys.Options
	}
	facts := []Fact{{"mount binaries", f.Describe()}, {"/sys", sys}}
	return Planned{facts, mounts.Plan(f)}, nil
}

func fixCgroup(_ context.Context, h *Host) (Planned, error) {
	// What the image's kubelet will make of this cgroup version; an
	// unreadable version is check's to say, never a reason to stop.
	kubelet, kerr := cgroupfix.ReadKubeletVersion(h.Sys)
	h.State.Kubelet = found(kubelet, kerr)
	if h.State.CgroupV2 {
		return Planned{Actions: cgroupfix.PlanV2()}, nil
	}
	f, err := cgroupfix.DetectV1(h.Sys, h.mounts)
	if h.State.CgroupV1 = found(f, err); err != nil {
		return Planned{Actions: refusesV1(kubelet, kerr, []plan.Action{cgroupfix.DetectedV1()})}, err
	}
	facts := []Fact{{"current cgroup", f.Current}, {"cgroupns", strconv.FormatBool(f.Current == "/")}}
	actions, err := cgroupfix.PlanV1(f)
	return Planned{facts, refusesV1(kubelet, kerr, actions)}, err
}

// refusesV1 puts the warning that the image's kubelet refuses cgroup v1
// right after actions' first, "detected cgroup v1": kind's CLI waits for
// that line, which stays as it is and first.
func refusesV1(v cgroupfix.KubeletVersion, err error, actions []plan.Action) []plan.Action {
	if err != nil || len(actions) == 0 {
		return actions
	}
	if w, ok := cgroupfix.RefusesV1Warning(v); ok {
		return slices.Insert(actions, 1, w)
	}
	return actions
}

func fixMachineID(_ context.Context, h *Host) (Planned, error) {
	f, err := identity.DetectMachineID(h.Sys, cmp.Or(h.Rand, rand.Reader))
	if h.State.MachineID = found(f, err); err != nil {
		return Planned{}, err
	}
	dbus := f.DBus
	if f.DBusLink != "" {
		dbus += " -> " + f.DBusLink
	}
	return Planned{[]Fact{{identity.DBusMachineID, dbus}}, identity.PlanMachineID(f)}, nil
}

func fixProductName(_ context.Context, h *Host) (Planned, error) {
	f, err := identity.DetectProductName(h.Sys, h.mounts)
	if h.State.ProductName = found(f, err); err != nil {
		return Planned{}, err
	}
	return Planned{[]Fact{dmiFact(f.DMI)}, identity.PlanProductName(f)}, nil
}

func fixProductUUID(_ context.Context, h *Host) (Planned, error) {
	f, err := identity.DetectProductUUID(h.Sys, cmp.Or(h.Rand, rand.Reader), h.mounts)
	if h.State.ProductUUID = found(f, err); err != nil {
		return Planned{}, err
	}
	current := "missing"
	if f.Current != nil {
		current = strconv.Quote(string(f.Current))
	}
	facts := []Fact{{identity.ProductUUID, current}}
	for _, d := range f.DMI {
		facts = append(facts, dmiFact(d))
	}
	return Planned{facts, identity.PlanProductUUID(f)}, nil
}

func dmiFact(d identity.DMIFile) Fact {
	v := "absent"
	if d.Exists {
		v = "file"
		if d.Target != d.Path {
			v += " at " + d.Target
		}
		if d.Bound {
			v += ", bound"
		}
	}
	return Fact{d.Path, v}
}

func selectIptables(ctx context.Context, h *Host) (Planned, error) {
	f, err := h.netProbes().DetectIptables(ctx)
	if h.State.Iptables = found(f, err); err != nil {
		return Planned{}, err
	}
	facts := []Fact{
		{"legacy", f.Describe(network.Legacy)},
		{"nft", f.Describe(network.NFT)},
	}
	if f.Native.NotRun == "" {
		// Only when asked: an iptables backend holds Docker's rules
		// on every other node.
		facts = append(facts, Fact{"native nftables", f.Native.Describe()})
	}
	for _, name := range network.Alternatives {
		link := f.Links[name]
		if link == "" {
			link = "unset"
		}
		facts = append(facts, Fact{"alternative " + name, link})
	}
	return Planned{facts, network.PlanIptables(f)}, nil
}

// enableNetworkMagic plans from the backend select_iptables chose (in a
// dry run the alternatives are never switched, so it cannot be read back
// from them) and that backend's rules.
func enableNetworkMagic(ctx context.Context, h *Host) (Planned, error) {
	ipt := h.State.Iptables.Facts
	f, err := h.netProbes().DetectMagic(ctx, h.LookupEnv, ipt)
	if err != nil {
		h.State.Magic = found(f, err)
		return Planned{}, err
	}
	// The forwarder's unit runs this binary, as etcd-peer-nat's does.
	f.Executable = h.executable()
	h.State.Magic = found(f, nil)
	// kind#1689: etcd's data is closed until the kubelet starts it.
	peers := etcdpeers.Detect(h.Sys, f.Hostname)
	h.State.Peers = found(peers, nil)
	facts := described(f.Describe())
	actions, err := network.PlanMagic(f)
	if err != nil {
		return Planned{facts, actions}, err
	}
	facts = append(facts, described(peers.Describe(h.executable()))...)
	actions = append(actions, etcdpeers.Plan(peers, string(ipt.Mode()), h.executable())...)
	return Planned{facts, actions}, nil
}

// described is a package's Describe pairs (name, value) as facts.
func described(pairs [][2]string) []Fact {
	var facts []Fact
	for _, d := range pairs {
		facts = append(facts, Fact{d[0], d[1]})
	}
	return facts
}

// executable is h.Executable, or where kind's image has the binary.
func (h *Host) executable() string { return cmp.Or(h.Executable, plan.DefaultExecutable) }
