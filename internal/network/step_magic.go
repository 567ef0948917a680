package network

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
	"sync"
	"time"

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
	DockerHost    netip.Addr
	DockerHostErr error
	// Gateway is the IPv4 default route's gateway.
	Gateway    netip.Addr
	GatewayErr error

	// Rules is the output of Mode's iptables-save.
	Rules    []byte
	RulesErr error

	// Resolv is /etc/resolv.conf, nil when it does not exist.
	Resolv         *File
	OriginalExists bool
	// Search is KIND_DNS_SEARCH, nil when unset.
	Search *string

	Hostname string
	// IPv4 and IPv6 are the node's first usable address of each family,
	// invalid when it has none (the Err fields say why).
	IPv4, IPv6       netip.Addr
	IPv4Err, IPv6Err error
	// OldIPv4 and OldIPv6 are the addresses recorded at the last boot
	// (blanks trimmed), nil when there is no record.
	OldIPv4, OldIPv6 *string

	// Files are the NodeConfigFiles present, Cert and Key the API server's
	// pair (nil when missing); read only when an old address is recorded.
	Files     []File
	Cert, Key *File
}

// DetectMagic reads the facts, for the backend select_iptables chose from
// ipt. The rules are the ones its iptables-save printed there (nothing
// has changed them since); only when it was not run is it run again. The
// name lookups (and that iptables-save) run concurrently, each limited to
// timeout.
func DetectMagic(ctx context.Context, sys system.System, lookupEnv func(string) (string, bool), ipt IptablesFacts, timeout time.Duration) (MagicFacts, error) {
	return NewProbes(sys, timeout).DetectMagic(ctx, lookupEnv, ipt)
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

func (p *Probes) detectMagic(ctx context.Context, lookupEnv func(string) (string, bool), ipt IptablesFacts) (MagicFacts, error) {
	p.StartNames(ctx)
	mode := ipt.Mode()
	f := MagicFacts{Mode: mode}
	if v, ok := lookupEnv(DNSSearchEnv); ok {
		f.Search = &v
	}
	var wg sync.WaitGroup
	var saved bool
	if f.Rules, f.RulesErr, saved = ipt.SavedRules(mode); !saved {
		wg.Go(func() { f.Rules, _, f.RulesErr = p.sys.Run(ctx, []string{mode.SaveCommand()}, nil, p.timeout) })
	}
	err := f.readFiles(p.sys)
	wg.Wait()
	n := p.waitNames(ctx)
	if n.hostnameErr != nil {
		return f, n.hostnameErr
	}
	f.Hostname = n.hostname
	f.IPv4, f.IPv4Err = n.ipv4, n.ipv4Err
	f.IPv6, f.IPv6Err = n.ipv6, n.ipv6Err
	if err != nil {
		return f, err
	}
	if _, ok := noEmbeddedDNS(f); ok {
		// Nothing of Docker's DNS to point at the host (podman): its
		// address is written nowhere, so the boot does not wait for a
		// lookup that, on a node whose DNS cannot answer it, takes the
		// whole timeout. stopProbes ends it.
		f.DockerHostErr = ErrDockerHostNotNeeded
		return f, nil
	}
	f.DockerHost, f.DockerHostErr = p.waitDockerHost(ctx)
	return f, nil
}

// ErrDockerHostNotNeeded is MagicFacts.DockerHostErr on a node with
// nothing of Docker's embedded DNS (see noEmbeddedDNS).
var ErrDockerHostNotNeeded = errors.New("not waited for: the node does not use Docker's embedded DNS")

// DNSRestoreAhead is the iptables-restore enable_network_magic will plan
// first, decided as the step decides it (DetectIptables, DetectMagic,
// PlanMagic) but before step 1 has finished: its inputs are the probes'
// answers and files that steps 1–9 leave alone, so boot can start it
// early (plan.Ahead). ok is false when the step would fail before it, or
// plan none.
func (p *Probes) DNSRestoreAhead(ctx context.Context, lookupEnv func(string) (string, bool)) (plan.Action, bool) {
	ipt, err := p.DetectIptables(ctx)
	if err != nil {
		return plan.Action{}, false
	}
	f, err := p.DetectMagic(ctx, lookupEnv, ipt)
	if err != nil {
		return plan.Action{}, false
	}
	// A plan that fails still applies the actions before the failure.
	actions, _ := PlanMagic(f)
	if len(actions) == 0 || actions[0].Op != plan.OpRun {
		return plan.Action{}, false
	}
	return actions[0], true
}

// readFiles reads what DetectMagic needs from files, while its probes run.
func (f *MagicFacts) readFiles(sys system.System) error {
	if route, err := sys.ReadFile(ProcNetRoute, system.LimitTable); err != nil {
		f.GatewayErr = err
	} else if f.Gateway, err = DefaultGatewayV4(route); err != nil {
		f.GatewayErr = fmt.Errorf("%s: %w", ProcNetRoute, err)
	}
	var err error
	if f.Resolv, err = readFile(sys, ResolvConf); err != nil {
		return err
	}
	if _, err := sys.Lstat(ResolvConfOriginal); err == nil {
		f.OriginalExists = true
	} else if !system.NotExist(err) {
		return err
	}
	if f.OldIPv4, err = readRecord(sys, OldIPv4); err != nil {
		return err
	}
	if f.OldIPv6, err = readRecord(sys, OldIPv6); err != nil {
		return err
	}
	if f.OldIPv4 == nil && f.OldIPv6 == nil {
		// First boot: nothing can hold an old address yet.
		return nil
	}
	for _, p := range NodeConfigFiles {
		file, err := readFile(sys, p)
		if err != nil {
			return err
		}
		if file != nil {
			f.Files = append(f.Files, *file)
		}
	}
	if f.Cert, err = readFile(sys, APIServerCert); err != nil {
		return err
	}
	f.Key, err = readFile(sys, APIServerKey)
	return err
}

// hostname is the kernel's hostname, as hostname(1) prints it; /etc/hostname
// when /proc does not say (a captured tree).
func hostname(sys system.System) (string, error) {
	for _, p := range []string{procHostname, etcHostname} {
		b, err := sys.ReadFile(p, system.LimitValue)
		if system.NotExist(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		name, _, _ := strings.Cut(string(b), "\n")
		if name = strings.TrimSpace(name); name != "" {
			return name, nil
		}
	}
	return "", nil
}

// lookupFirst returns the first address of network ("ip4" or "ip6") for
// host. With nodeAddr it skips what cannot be the node's own address:
// loopback (Debian's 127.0.1.1 HOSTNAME line), unspecified, multicast,
// broadcast (UsableHostIP) and IPv4-mapped addresses.
func lookupFirst(ctx context.Context, sys system.System, timeout time.Duration, network, host string, nodeAddr bool) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addrs, err := sys.LookupIP(ctx, network, host)
	if errors.Is(err, context.DeadlineExceeded) {
		return netip.Addr{}, &system.TimeoutError{What: "looking up " + host, After: timeout}
	}
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		a = a.WithZone("")
		if (network == "ip4") != a.Is4() || a.Is4In6() {
			continue
		}
		if nodeAddr && !UsableHostIP(a) {
			continue
		}
		return a, nil
	}
	return netip.Addr{}, fmt.Errorf("%s has no usable %s address", host, strings.Replace(network, "ip", "IPv", 1))
}

// HostIP is the address pods reach the Docker host's DNS by, and where it
// comes from: host.docker.internal unless that is missing or loopback (the
// node's loopback is not the host's), else the default gateway.
func (f MagicFacts) HostIP() (netip.Addr, string) {
	if UsableHostIP(f.DockerHost) {
		return f.DockerHost, DockerHostName
	}
	why := fmt.Sprintf("%s: %v", DockerHostName, f.DockerHostErr)
	if f.DockerHost.IsValid() {
		why = DockerHostName + " " + unusableWhy(f.DockerHost)
	}
	if f.Gateway.IsValid() {
		return f.Gateway, "default gateway; " + why
	}
	return netip.Addr{}, fmt.Sprintf("%s; default gateway: %v", why, f.GatewayErr)
}

// Describe lists the facts for --dry-run.
func (f MagicFacts) Describe() [][2]string {
	ip, source := f.HostIP()
	host := fmt.Sprintf("%s (%s)", show(ip), source)
	if errors.Is(f.DockerHostErr, ErrDockerHostNotNeeded) {
		host = "not needed (the node does not use Docker's embedded DNS)"
	}
	out := [][2]string{{"host IP", host}}
	if f.RulesErr != nil {
		out = append(out, [2]string{"iptables rules", fmt.Sprintf("%s failed: %v", f.Mode.SaveCommand(), f.RulesErr)})
	} else {
		out = append(out, [2]string{"iptables rules", fmt.Sprintf("%d (%s)", CountRules(f.Rules), f.Mode.SaveCommand())})
	}
	search := "unset"
	if f.Search != nil {
		search = fmt.Sprintf("%q", *f.Search)
	}
	out = append(out, [2]string{DNSSearchEnv, search}, [2]string{"hostname", f.Hostname})
	for _, a := range []struct {
		name string
		addr netip.Addr
		err  error
		old  *string
	}{{"IPv4", f.IPv4, f.IPv4Err, f.OldIPv4}, {"IPv6", f.IPv6, f.IPv6Err, f.OldIPv6}} {
		v := show(a.addr)
		if a.err != nil {
			v += " (" + a.err.Error() + ")"
		}
		if a.old != nil {
			v += fmt.Sprintf(", recorded %q", *a.old)
		}
		out = append(out, [2]string{a.name, v})
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
	if why, ok := noEmbeddedDNS(f); ok {
		// No address of the Docker host is needed: only a search line
		// may change.
		actions = append(actions, plan.Info(why))
		a, err := planResolvConf(f, netip.Addr{}, false)
		actions = append(actions, a...)
		if err != nil {
			return actions, err
		}
	} else if !hostIP.IsValid() {
		actions = append(actions, plan.Warning(fmt.Sprintf(
			"found no address of the Docker host (%s); leaving the DNS rules and the nameservers of %s as they are", source, ResolvConf)))
		// KIND_DNS_SEARCH is the user's, not Docker's: applied all
		// the same (unset, it changes nothing).
		if f.Search != nil {
			a, err := planResolvConf(f, netip.Addr{}, false)
			actions = append(actions, a...)
			if err != nil {
				return actions, err
			}
		}
	} else {
		a, served, err := planDNSRules(f, hostIP)
		actions = append(actions, a...)
		if err != nil {
			return actions, err
		}
		a, err = planResolvConf(f, hostIP, served)
		actions = append(actions, a...)
		if err != nil {
			return actions, err
		}
	}
	a, err := planAddressChange(f)
	return append(actions, a...), err
}

// planDNSRules points Docker's embedded-DNS rules at the host IP; see
// RewriteDockerDNS. served reports whether the rules, once applied, take
// DNS queries for the host IP to Docker's server: only then may
// resolv.conf name the host IP instead of 127.0.0.11.
func planDNSRules(f MagicFacts, hostIP netip.Addr) (actions []plan.Action, served bool, err error) {
	if f.RulesErr != nil {
		// The script stops here too (its iptables-save fails the
		// pipeline). A cluster whose pods cannot resolve a name is worse
		// than a node that says why it did not start; only a node that
		// does not use Docker's DNS loses nothing by booting on.
		if f.Resolv != nil && namesEmbeddedDNS(f.Resolv.Data) {
			return nil, false, fmt.Errorf("cannot read the %s rules, which pods need to reach Docker's DNS at %s: %w",
				f.Mode, dockerEmbeddedDNS, f.RulesErr)
		}
		return []plan.Action{plan.Warning(fmt.Sprintf(
			"cannot read the %s rules (%v); %s does not use Docker's DNS, so nothing needs them", f.Mode, f.RulesErr, ResolvConf))}, false, nil
	}
	out, changed := RewriteDockerDNS(f.Rules, hostIP.String())
	served = dnatsToEmbeddedDNS(out)
	if !changed {
		return nil, served, nil
	}
	return []plan.Action{
		// Fatal on failure: resolv.conf, rewritten next, must not name
		// an address no rule serves.
		plan.Run([]string{f.Mode.RestoreCommand()}, out, CommandTimeout).
			Because(fmt.Sprintf("Docker's DNS rules for %s now serve pods via %s", dockerEmbeddedDNS, hostIP)),
	}, served, nil
}

// noEmbeddedDNS says why the step leaves the nameservers and the DNS rules
// alone on a node with no trace of Docker's embedded DNS: podman (its
// aardvark-dns or dnsname plugin answers at the network's gateway, an
// address pods reach as they are) and other engines whose resolv.conf needs
// no rewrite. A Docker node always has both the nameserver line (until it
// is rewritten) and the DNAT rules (Docker re-creates them in every new
// network namespace), so it never gets this line. ok is false when there is
// something of Docker's, or when resolv.conf or the rules could not be read
// (those cases have their own lines).
func noEmbeddedDNS(f MagicFacts) (string, bool) {
	if f.Resolv == nil || f.RulesErr != nil || namesEmbeddedDNS(f.Resolv.Data) || dnatsToEmbeddedDNS(f.Rules) {
		return "", false
	}
	return fmt.Sprintf("no nameserver %s in %s and no %s rule sending to it (not Docker's embedded DNS): leaving the nameservers and the DNS rules as they are",
		dockerEmbeddedDNS, ResolvConf, f.Mode), true
}

// dnatsToEmbeddedDNS reports whether iptables-save output has a rule
// sending packets to Docker's embedded DNS server.
func dnatsToEmbeddedDNS(save []byte) bool {
	for line := range bytes.Lines(save) {
		if line[0] != '-' {
			continue
		}
		r := parseRule(strings.TrimRight(string(line), "\r\n"))
		for i := range r.args {
			if r.arg(i) == "--to-destination" {
				if to := r.arg(i + 1); to == dockerEmbeddedDNS || strings.HasPrefix(to, dockerEmbeddedDNS+":") {
					return true
				}
			}
		}
	}
	return false
}

// namesEmbeddedDNS reports whether resolv.conf has a nameserver line for
// Docker's embedded DNS server: a line the rewrite points at the host IP
// (see resolvFields), and no other. strings.Fields also split at blanks
// no resolver splits at (a vertical tab, U+00A0), so a line the rewrite
// rightly left alone made a node without Docker's DNS fail for the rules.
func namesEmbeddedDNS(resolv []byte) bool {
	for line := range bytes.Lines(resolv) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if f, n := resolvFields(line); namesEmbeddedDNSLine(line, f, n) {
			return true
		}
	}
	return false
}

// planResolvConf keeps the original and rewrites /etc/resolv.conf in place:
// Docker bind-mounts it, and a rename over a mount point fails. Without a
// host IP only the search lines change (KIND_DNS_SEARCH).
func planResolvConf(f MagicFacts, hostIP netip.Addr, served bool) ([]plan.Action, error) {
	if f.Resolv == nil {
		return []plan.Action{plan.Warning(ResolvConf + " does not exist; not rewriting it")}, nil
	}
	if hostIP.IsValid() && namesEmbeddedDNS(f.Resolv.Data) && !served {
		// The rules were saved from a backend Docker did not write to
		// (its save hung or failed). The script would point resolv.conf
		// at the host IP all the same and break the node's own DNS; left
		// as it is, the node resolves but its pods cannot. Either way
		// the cluster's DNS is broken: say so and stop.
		return nil, fmt.Errorf("the %s rules send nothing to %s, which %s names: pods could not use Docker's DNS (are Docker's rules in the other backend?)",
			f.Mode, dockerEmbeddedDNS, ResolvConf)
	}
	out, err := rewriteResolvConf(f.Resolv.Data, hostIP, f.Search)
	if err != nil {
		return nil, fmt.Errorf("rewrite %s: %w", ResolvConf, err)
	}
	changed := !bytes.Equal(out, f.Resolv.Data)
	var actions []plan.Action
	// The copy is of what Docker wrote: after a restart the file is
	// already rewritten, and the first boot's copy is the one to keep.
	if changed || !f.OriginalExists {
		actions = append(actions, plan.WriteFile(ResolvConfOriginal, f.Resolv.Data, f.Resolv.Mode))
	}
	if changed {
		actions = append(actions, plan.WriteInPlace(ResolvConf, out).
			Because("a bind mount: rewritten in place"))
	}
	return actions, nil
}

// replacement is one address change to make in the node's files.
type replacement struct{ old, new string }

// planAddressChange follows a change of the node's addresses since the last
// boot (Docker gives a restarted container a new address), in the node's
// config files and the API server's certificate, and records the current
// addresses.
func planAddressChange(f MagicFacts) ([]plan.Action, error) {
	var actions []plan.Action
	var changes []replacement
	var records []plan.Action
	for _, fam := range []struct {
		name    string
		cur     netip.Addr
		old     *string
		file    string
		is4     bool
		missing func(msg string) error // nil: an ERROR line is enough
	}{
		{"IPv4", f.IPv4, f.OldIPv4, OldIPv4, true, func(msg string) error { return errors.New(msg) }},
		{"IPv6", f.IPv6, f.OldIPv6, OldIPv6, false, nil},
	} {
		// As the script (getent's empty answer): no value, not "none".
		cur := ""
		if fam.cur.IsValid() {
			cur = fam.cur.String()
		}
		actions = append(actions, plan.Info("detected "+fam.name+" address: "+cur))
		if fam.old != nil {
			old := *fam.old
			actions = append(actions, plan.Info(fmt.Sprintf("detected old %s address: %s", fam.name, old)))
			oldAddr, err := netip.ParseAddr(old)
			switch {
			case err != nil || oldAddr.Is4() != fam.is4 || oldAddr.Zone() != "":
				actions = append(actions, plan.Error(fmt.Sprintf(
					"%s: %q is not an %s address; not following an address change", fam.file, clip(old), fam.name)))
			case oldAddr.Is4In6():
				// The reference recorded getent ahostsv6's IPv4-mapped
				// answer on IPv4-only networks: no IPv6 address at all.
				actions = append(actions, plan.Info(fmt.Sprintf(
					"%s: %s is IPv4-mapped, not an IPv6 address; ignoring it", fam.file, old)))
			case !fam.cur.IsValid():
				// The script's words: the old address is the line above,
				// and why the lookup failed is a fact of the dry run.
				msg := "have an old " + fam.name + " address but no current " + fam.name + " address (!)"
				if fam.missing != nil {
					return actions, fam.missing(msg)
				}
				actions = append(actions, plan.Error(msg))
			case oldAddr != fam.cur:
				if _, _, err := ReplaceAddress(nil, old, fam.cur.String()); err != nil {
					actions = append(actions, plan.Error(fmt.Sprintf(
						"%s: cannot replace %s with %s: %v", fam.file, old, fam.cur, err)))
					break
				}
				changes = append(changes, replacement{old, fam.cur.String()})
			}
		}
		if fam.cur.IsValid() && (fam.old == nil || *fam.old != fam.cur.String()) {
			records = append(records, plan.WriteFile(fam.file, []byte(fam.cur.String()), 0o644).
				Because("the address to follow after a restart"))
		}
	}

	for _, file := range f.Files {
		data, total := file.Data, 0
		var done []string
		for _, c := range changes {
			out, n, err := ReplaceAddress(data, c.old, c.new)
			if err != nil {
				return actions, fmt.Errorf("%s: %w", file.Path, err)
			}
			if n > 0 {
				data, total = out, total+n
				done = append(done, fmt.Sprintf("%s -> %s", c.old, c.new))
			}
		}
		if total > 0 {
			places := "places"
			if total == 1 {
				places = "place"
			}
			actions = append(actions, plan.WriteFile(file.Path, data, file.Mode).
				Because(fmt.Sprintf("%s (%d %s)", strings.Join(done, ", "), total, places)))
		}
	}
	actions = append(actions, records...)
	if len(changes) > 0 {
		actions = append(actions, planCertRenewal(f)...)
	}
	return actions, nil
}

// planCertRenewal regenerates the API server's certificate, whose SANs hold
// the old address. kubeadm will not replace an existing certificate, so the
// old pair is moved aside first (kept as .old) and put back if kubeadm
// fails, or exits 0 without writing both: a certificate for the old
// address still lets the node boot, none at all does not. Once the pair in
// place is whole again, new or put back, the kept copy goes: no stray copy
// of a private key is left. (Were the pair not put back, Apply would stop
// before that, and .old would be the only copy.)
func planCertRenewal(f MagicFacts) []plan.Action {
	if f.Cert == nil || f.Key == nil {
		return nil // not a control-plane node
	}
	hasConfig := false
	for _, file := range f.Files {
		hasConfig = hasConfig || file.Path == KubeadmConfig
	}
	if !hasConfig {
		return []plan.Action{plan.Error(fmt.Sprintf(
			"cannot regenerate the API server certificate for the new address: %s does not exist", KubeadmConfig))}
	}
	restoreCert := plan.WriteFile(f.Cert.Path, f.Cert.Data, f.Cert.Mode)
	restoreKey := plan.WriteFile(f.Key.Path, f.Key.Data, f.Key.Mode)
	return []plan.Action{
		plan.Info("clearing and regenerating the certificate for serving the Kubernetes API"),
		plan.WriteFile(f.Cert.Path+".old", f.Cert.Data, f.Cert.Mode).Because("keep the old pair until a new one exists"),
		plan.WriteFile(f.Key.Path+".old", f.Key.Data, f.Key.Mode),
		plan.Remove(f.Cert.Path).Because("kubeadm refuses to replace an existing certificate"),
		plan.Remove(f.Key.Path).WithRollback(restoreCert),
		plan.Run(KubeadmCertsArgv, nil, KubeadmTimeout).Creating(f.Cert.Path, f.Key.Path).
			OrError("kept the old API server certificate, which does not cover the new address; regenerating it failed").
			WithRollback(restoreCert, restoreKey),
		plan.Remove(f.Cert.Path + ".old").OrWarn("failed to remove " + f.Cert.Path + ".old"),
		plan.Remove(f.Key.Path + ".old").OrWarn("failed to remove " + f.Key.Path + ".old"),
	}
}

// readFile reads a regular file and its permission bits; nil when missing.
func readFile(sys system.System, p string) (*File, error) {
	fi, err := sys.Stat(p)
	if system.NotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", p, fi.Mode().Type())
	}
	b, err := sys.ReadFile(p, system.LimitConfig)
	if err != nil {
		return nil, err
	}
	return &File{Path: p, Data: b, Mode: fi.Mode().Perm()}, nil
}

// readRecord reads a recorded address, blanks trimmed; nil when missing.
func readRecord(sys system.System, p string) (*string, error) {
	b, err := sys.ReadFile(p, system.LimitValue)
	if system.NotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	return &s, nil
}

// clip shortens garbage for a log line.
func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
