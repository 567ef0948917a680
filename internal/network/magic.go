package network

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Names and files enable_network_magic uses.
const (
	// DockerHostName resolves to the Docker host where Docker provides it
	// (Docker Desktop, or --add-host=host.docker.internal:host-gateway).
	DockerHostName     = "host.docker.internal"
	DNSSearchEnv       = "KIND_DNS_SEARCH"
	ResolvConf         = "/etc/resolv.conf"
	ResolvConfOriginal = "/etc/resolv.conf.original"
	ProcNetRoute       = "/proc/net/route"
	OldIPv4            = "/kind/old-ipv4"
	OldIPv6            = "/kind/old-ipv6"
	KubeadmConfig      = "/kind/kubeadm.conf"
	APIServerCert      = "/etc/kubernetes/pki/apiserver.crt"
	APIServerKey       = "/etc/kubernetes/pki/apiserver.key"

	procHostname = "/proc/sys/kernel/hostname"
	etcHostname  = "/etc/hostname"
)

// NodeConfigFiles hold the node's own address once kubeadm has run; after a
// restart that changed it, each one present is rewritten. kubelet.conf is
// the later upstream addition (kind after v0.23.0).
var NodeConfigFiles = []string{
	"/etc/kubernetes/manifests/etcd.yaml",
	"/etc/kubernetes/manifests/kube-apiserver.yaml",
	"/etc/kubernetes/manifests/kube-controller-manager.yaml",
	"/etc/kubernetes/manifests/kube-scheduler.yaml",
	"/etc/kubernetes/controller-manager.conf",
	"/etc/kubernetes/scheduler.conf",
	"/etc/kubernetes/kubelet.conf",
	KubeadmConfig,
	"/var/lib/kubelet/kubeadm-flags.env",
}

// kubeconfigs are the NodeConfigFiles that are kubeconfigs: each may
// embed a client key (client-key-data), so a plan never shows them.
var kubeconfigs = map[string]bool{
	"/etc/kubernetes/controller-manager.conf": true,
	"/etc/kubernetes/scheduler.conf":          true,
	"/etc/kubernetes/kubelet.conf":            true,
}

// KubeadmCertsArgv regenerates the API server's serving certificate for the
// addresses in kind's kubeadm config.
var KubeadmCertsArgv = []string{"kubeadm", "init", "phase", "certs", "apiserver", "--config", KubeadmConfig}

// File is a file's content and permission bits.
type File struct {
	Path string
	Data []byte
	Mode fs.FileMode
}

// MagicFacts is what enable_network_magic needs.
type MagicFacts struct {
	// Mode is the iptables backend select_iptables chose.
	Mode Mode

	// DockerHost is the first IPv4 address of host.docker.internal.
	DockerHost system.Probe[netip.Addr]
	// Gateway is the IPv4 default route's gateway.
	Gateway system.Probe[netip.Addr]
	// Rules is the output of Mode's iptables-save.
	Rules system.Probe[[]byte]
	// Iptables is what select_iptables read: its failed saves, every
	// place it looked for Docker's DNS rules, the native ruleset.
	Iptables IptablesFacts

	// Resolv is /etc/resolv.conf, nil when it does not exist.
	Resolv         *File
	OriginalExists bool
	// Search is KIND_DNS_SEARCH, nil when unset.
	Search *string

	Hostname   string
	IPv4, IPv6 NodeAddr

	// Files are the NodeConfigFiles present, Cert and Key the API server's
	// pair (nil when missing); read only when an old address is recorded.
	Files     []File
	Cert, Key *File

	// IPv6Forwarding: net.ipv6.conf.all.forwarding is 1 (see
	// magic_forwarder.go). Forwarder is what is there of the forwarder's
	// unit.
	IPv6Forwarding bool
	Forwarder      plan.Installed
	// Executable is the binary the forwarder's unit runs: not read, but
	// set by the caller (boot: the running binary); "" is
	// plan.DefaultExecutable.
	Executable string
}

// DetectMagic is the package's DetectMagic on the lookups p started (or
// starts now). It reads the facts once per Probes: the step's head start
// (DNSRestoreAhead) and the step itself both ask for them, with the same
// environment and saves, and nothing between them changes what is read
// (see Probes). A call for another backend reads afresh.
func (p *Probes) DetectMagic(ctx context.Context, lookupEnv func(string) (string, bool), ipt IptablesFacts) (MagicFacts, error) {
	mode := ipt.Mode()
	p.magicOnce.Do(func() {
		p.magicMode = mode
		p.magic, p.magicErr = p.detectMagic(ctx, lookupEnv, ipt)
	})
	if mode != p.magicMode {
		return p.detectMagic(ctx, lookupEnv, ipt)
	}
	return p.magic, p.magicErr
}

// HostIP is the address pods reach the Docker host's DNS by, and where it
// comes from: host.docker.internal unless that is missing or loopback (the
// node's loopback is not the host's), else the default gateway.
func (f MagicFacts) HostIP() (netip.Addr, string) {
	if UsableHostIP(f.DockerHost.Value) {
		return f.DockerHost.Value, DockerHostName
	}
	why := fmt.Sprintf("%s: %v", DockerHostName, f.DockerHost.Err)
	switch v := f.DockerHost.Value; {
	case v.IsLoopback():
		why = DockerHostName + " is loopback " + v.String()
	case v.IsValid():
		why = DockerHostName + " answers " + v.String() + ", which names no host"
	}
	if f.Gateway.Value.IsValid() {
		return f.Gateway.Value, "default gateway; " + why
	}
	return netip.Addr{}, fmt.Sprintf("%s; default gateway: %v", why, f.Gateway.Err)
}

// Describe lists the facts for --dry-run.
func (f MagicFacts) Describe() [][2]string {
	ip, source := f.HostIP()
	host := fmt.Sprintf("%s (%s)", show(ip), source)
	if errors.Is(f.DockerHost.Err, ErrDockerHostNotNeeded) {
		host = "not needed (the node does not use Docker's embedded DNS)"
	}
	rules := fmt.Sprintf("%d (%s)", CountRules(f.Rules.Value), f.Mode.SaveCommand())
	if f.Rules.Err != nil {
		rules = fmt.Sprintf("%s failed: %v", f.Mode.SaveCommand(), f.Rules.Err)
	}
	out := [][2]string{{"host IP", host}, {"iptables rules", rules}}
	if d, ok := f.Iptables.Native.Docker(); ok {
		out = append(out, [2]string{"Docker's DNS", fmt.Sprintf("native nftables, table ip %s (udp %s, tcp %s)", d.Table, portOrNone(d.UDPPort), portOrNone(d.TCPPort))})
	}
	search := "unset"
	if f.Search != nil {
		search = fmt.Sprintf("%q", *f.Search)
	}
	out = append(out, [2]string{DNSSearchEnv, search}, [2]string{"hostname", f.Hostname})
	for _, a := range []struct {
		name string
		NodeAddr
	}{{"IPv4", f.IPv4}, {"IPv6", f.IPv6}} {
		v := show(a.Addr)
		switch {
		case a.Iface != "":
			v += fmt.Sprintf(" (from the default route's interface %s; %v)", a.Iface, a.Err)
		case a.Err != nil:
			v += " (" + a.Err.Error() + ")"
		}
		if a.Old != nil {
			v += fmt.Sprintf(", recorded %q", *a.Old)
		}
		out = append(out, [2]string{a.name, v})
	}
	if f.IPv6Forwarding {
		// Only then: the plans of other nodes show what they did.
		out = append(out, [2]string{"IPv6 forwarding", "on (an ipv6 or dual-stack kind cluster)"})
	}
	return out
}

func show(a netip.Addr) string {
	if !a.IsValid() {
		return "none"
	}
	return a.String()
}

// PlanMagic makes Docker's embedded DNS usable from pods and follows a
// change of the node's address. It returns the actions decided before a
// fatal problem along with it.
func PlanMagic(f MagicFacts) ([]plan.Action, error) {
	// Refused whether or not resolv.conf is rewritten on this boot: the
	// variable is wrong, not the host.
	if f.Search != nil {
		if err := checkSearch(*f.Search); err != nil {
			return nil, fmt.Errorf("%s: %w", DNSSearchEnv, err)
		}
	}
	var actions []plan.Action
	hostIP, source := f.HostIP()
	why, noDocker := noEmbeddedDNS(f)
	switch {
	case noDocker:
		// No address of the Docker host is needed: only a search line
		// may change.
		actions = append(actions, plan.Info(why))
	case !hostIP.IsValid():
		actions = append(actions, plan.Warning(fmt.Sprintf(
			"found no address of the Docker host (%s); leaving the DNS rules and the nameservers of %s as they are", source, ResolvConf)))
	default:
		a, served, err := planDNSRules(f, hostIP)
		actions = append(actions, a...)
		if err != nil {
			return actions, err
		}
		var v6 netip.Addr
		if served {
			v6, _ = f.ForwarderAddr()
		}
		a, forwarded, err := planResolvConf(f, hostIP, served, v6)
		actions = append(actions, a...)
		if err != nil {
			return actions, err
		}
		if forwarded {
			actions = append(actions, planForwarder(f, v6, hostIP)...)
		}
	}
	// KIND_DNS_SEARCH is the user's, not Docker's: applied all the same
	// without a host IP (unset, it changes nothing).
	if noDocker || !hostIP.IsValid() && f.Search != nil {
		a, _, err := planResolvConf(f, netip.Addr{}, false, netip.Addr{})
		actions = append(actions, a...)
		if err != nil {
			return actions, err
		}
	}
	a, err := planAddressChange(f)
	return append(actions, a...), err
}
