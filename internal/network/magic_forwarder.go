package network

// This file holds the IPv6 part of enable_network_magic: the DNS
// forwarder that lets IPv6-only pods reach Docker's embedded DNS
// (kind#4152, kind#3114), and the nameserver line that points them at it.

import (
	"bytes"
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// Files and names of the forwarder.
const (
	// IPv6Forwarding is net.ipv6.conf.all.forwarding. kind's CLI sets
	// it to 1 (docker/podman run --sysctl) exactly for clusters with an
	// IPv6 family, ipv6 and dual, and never for ipv4 ones: the one fact
	// the node has at its first boot, before kubeadm's config exists,
	// that tells them apart.
	IPv6Forwarding      = "/proc/sys/net/ipv6/conf/all/forwarding"
	ForwarderCommand    = "dns-forwarder"
	ForwarderUnitName   = "kind-dns-forwarder.service"
	forwarderMemoryMax  = "64M"
	forwarderTasksMax   = "64"
	forwarderListenPort = 53
)

// ForwarderUnit is the runtime unit of exe's forwarder answering on
// listen and asking upstream, both on port 53. It runs as long as the
// node, restarted on failure a bounded number of times.
func ForwarderUnit(exe string, listen, upstream netip.Addr) plan.RuntimeUnit {
	return plan.RuntimeUnit{
		Name:        ForwarderUnitName,
		Description: "DNS for IPv6-only pods: forwards to Docker's embedded DNS via " + upstream.String(),
		Exec: []string{exe, ForwarderCommand,
			"--listen", netip.AddrPortFrom(listen, forwarderListenPort).String(),
			"--upstream", netip.AddrPortFrom(upstream, 53).String()},
		MemoryMax: forwarderMemoryMax,
		TasksMax:  forwarderTasksMax,
		Restart:   true,
	}
}

// ForwarderAddr is the address the forwarder answers on, or why there is
// none: the node's own IPv6 address (what its name resolves to), on a
// node of a cluster with an IPv6 family. The rest (Docker's DNS in use,
// its rules serving the host IP, resolv.conf naming it) PlanMagic checks.
func (f MagicFacts) ForwarderAddr() (netip.Addr, string) {
	switch {
	case !f.IPv6.Addr.IsValid():
		return netip.Addr{}, "the node has no IPv6 address"
	case !f.IPv6Forwarding:
		return netip.Addr{}, fmt.Sprintf("%s is not 1: not an ipv6 or dual-stack kind cluster", IPv6Forwarding)
	}
	return f.IPv6.Addr, ""
}

// planForwarder starts the forwarder at listen for queries to upstream,
// run by f.Executable (DefaultExecutable when unset).
func planForwarder(f MagicFacts, listen, upstream netip.Addr) []plan.Action {
	u := ForwarderUnit(cmp.Or(f.Executable, plan.DefaultExecutable), listen, upstream)
	return append([]plan.Action{plan.Info(fmt.Sprintf(
		"%s %s: %s runs %s", forwarderLogPrefix,
		netip.AddrPortFrom(listen, forwarderListenPort), u.Path(), u.CommandLine()))},
		u.Install(f.Forwarder, "IPv6 pods reach Docker's DNS through it (kind#4152)")...)
}

// forwarderLogPrefix starts the line planForwarder logs, and so marks a
// plan that runs the forwarder (ForwarderPlanned).
const forwarderLogPrefix = "IPv6 pods resolve through"

// ForwarderPlanned reports whether actions (step 10's) run the forwarder,
// whether or not its unit is there already.
func ForwarderPlanned(actions []plan.Action) bool {
	return slices.ContainsFunc(actions, func(a plan.Action) bool {
		return a.Op == plan.OpLog && strings.HasPrefix(string(a.Data), forwarderLogPrefix+" ")
	})
}

// withForwarder adds "nameserver v6" to a rewritten resolv.conf, right
// after the first nameserver line naming host (the IPv4 path to Docker's
// DNS stays first: the node's own resolver and every IPv4 pod keep using
// it). Nameserver lines naming v6 or old (the address recorded at the
// last boot: resolv.conf outlives a restart, the address may not) are
// dropped first, so a second run changes nothing. ok is false, and resolv
// comes back as it was, when no line names host: then resolv.conf is not
// Docker's, and there is nothing to forward to.
func withForwarder(resolv []byte, host, v6, old netip.Addr) (out []byte, ok bool) {
	var hostLine int = -1
	var lines [][]byte
	for line := range bytes.Lines(resolv) {
		f, n := resolvFields(bytes.TrimSuffix(line, []byte("\n")))
		if n > 1 && string(line[f[0].start:f[0].end]) == "nameserver" {
			a, err := netip.ParseAddr(string(line[f[1].start:f[1].end]))
			if err == nil && (a == v6 || (old.IsValid() && a == old)) {
				continue
			}
			if err == nil && a == host && hostLine < 0 {
				hostLine = len(lines)
			}
		}
		lines = append(lines, line)
	}
	if hostLine < 0 {
		return resolv, false
	}
	out = make([]byte, 0, len(resolv)+len("nameserver \n")+len(v6.String()))
	for i, line := range lines {
		out = append(out, line...)
		if i == hostLine {
			if !bytes.HasSuffix(line, []byte("\n")) {
				out = append(out, '\n')
			}
			out = append(out, "nameserver "+v6.String()+"\n"...)
		}
	}
	return out, true
}
