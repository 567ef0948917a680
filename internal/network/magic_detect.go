package network

// This file holds enable_network_magic's detection: the files it reads and
// the lookups it waits for.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// detectMagic reads the facts, for the backend select_iptables chose from
// ipt. The rules are the ones its iptables-save printed there (nothing
// has changed them since); only when it was not run is it run again. The
// name lookups (and that iptables-save) run concurrently, each limited to
// the probes' timeout.
func (p *Probes) detectMagic(ctx context.Context, lookupEnv func(string) (string, bool), ipt IptablesFacts) (MagicFacts, error) {
	p.StartNames(ctx)
	mode := ipt.Mode()
	f := MagicFacts{Mode: mode}
	if v, ok := lookupEnv(DNSSearchEnv); ok {
		f.Search = &v
	}
	var wg sync.WaitGroup
	var saved bool
	if f.Rules.Value, f.Rules.Err, saved = ipt.SavedRules(mode); !saved {
		wg.Go(func() { f.Rules.Value, _, f.Rules.Err = runSave(ctx, p.sys, mode.SaveCommand(), p.timeout) })
	}
	f.Iptables = ipt
	err := f.readFiles(p.sys)
	wg.Wait()
	<-p.namesDone
	n := p.names
	if n.hostnameErr != nil {
		return f, n.hostnameErr
	}
	f.Hostname = n.hostname
	f.IPv4.Addr, f.IPv4.Iface, f.IPv4.Err = n.ipv4.Addr, n.ipv4.Iface, n.ipv4.Err
	f.IPv6.Addr, f.IPv6.Iface, f.IPv6.Err = n.ipv6.Addr, n.ipv6.Iface, n.ipv6.Err
	if err != nil {
		return f, err
	}
	if _, ok := noEmbeddedDNS(f); ok {
		// Nothing of Docker's DNS to point at the host (podman): its
		// address is written nowhere, so the boot does not wait for a
		// lookup that, on a node whose DNS cannot answer it, takes the
		// whole timeout. stopProbes ends it.
		f.DockerHost.Err = ErrDockerHostNotNeeded
		return f, nil
	}
	<-p.hostDone
	f.DockerHost = p.host
	return f, nil
}

// backendHint is the likely cause of rules of the chosen backend that
// send nothing to Docker's DNS while resolv.conf names it, after what was
// looked at: a save that failed (counted as no rules, so the other backend
// may have been chosen); nft, which shows Docker 29's native redirect,
// missing or failing; else no place holds Docker's rules.
func (f MagicFacts) backendHint() string {
	looked := ""
	if len(f.Iptables.Saves) > 0 {
		looked = "looked at: " + f.Iptables.LookedAt() + "; "
	}
	switch {
	case len(f.Iptables.Failed()) > 0:
		return looked + fmt.Sprintf("likely cause: %s, counted as no rules when the backend was chosen", strings.Join(f.Iptables.Failed(), "; "))
	case system.NotInstalled(f.Iptables.Native.Err):
		return looked + "likely cause: Docker's nftables firewall backend (Docker 29+) writes the redirect as a native nftables table, and the node image has no nft to read it (install Debian's nftables package)"
	case f.Iptables.Native.Err != nil:
		return looked + "likely cause: Docker's nftables firewall backend (Docker 29+) writes the redirect as a native nftables table, and nft could not list it"
	case f.Iptables.Native.NotRun != "":
		return looked + "are Docker's rules in the other backend?"
	}
	return looked + "likely cause: the node is not on Docker's embedded DNS (a custom resolv.conf naming 127.0.0.11), or Docker writes its redirect somewhere this binary does not know"
}

// ErrDockerHostNotNeeded is MagicFacts.DockerHost.Err on a node with
// nothing of Docker's embedded DNS (see noEmbeddedDNS).
var ErrDockerHostNotNeeded = errors.New("not waited for: the node does not use Docker's embedded DNS")

// readFiles reads what DetectMagic needs from files, while its probes run.
func (f *MagicFacts) readFiles(sys system.System) error {
	route, err := sys.ReadFile(ProcNetRoute, system.LimitTable)
	if err != nil {
		f.Gateway.Err = err
	} else if f.Gateway.Value, err = defaultGatewayV4(route, binary.NativeEndian); err != nil {
		f.Gateway.Err = fmt.Errorf("%s: %w", ProcNetRoute, err)
	}
	if f.Resolv, err = readFile(sys, ResolvConf); err != nil {
		return err
	}
	if _, err := sys.Lstat(ResolvConfOriginal); err == nil {
		f.OriginalExists = true
	} else if !system.NotExist(err) {
		return err
	}
	// The forwarder's sysctl, and what is there of its unit.
	forwarding, err := system.ReadOptional(sys, IPv6Forwarding, system.LimitValue)
	if err != nil {
		return err
	}
	f.IPv6Forwarding = strings.TrimSpace(string(forwarding)) == "1"
	f.Forwarder = ForwarderUnit(plan.DefaultExecutable, netip.Addr{}, netip.Addr{}).Installed(sys)
	if f.IPv4.Old, err = readRecord(sys, OldIPv4); err != nil {
		return err
	}
	if f.IPv6.Old, err = readRecord(sys, OldIPv6); err != nil {
		return err
	}
	if f.IPv4.Old == nil && f.IPv6.Old == nil {
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
		b, err := system.ReadOptional(sys, p, system.LimitValue)
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
	b, err := system.ReadOptional(sys, p, system.LimitValue)
	if err != nil || b == nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	return &s, nil
}
