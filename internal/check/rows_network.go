package check

// This file holds the rows about the network: the iptables backend, the
// names the node resolves and the pod-network preflight.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// iptables is a row per backend and one for the mode chosen.
func (c *checker) iptables() []Row {
	f, err := c.st.Iptables.Get()
	if err != nil {
		return failRows(err, unreadableHint, "iptables-legacy", "iptables-nft", "iptables-mode", "docker-dns")
	}
	var rows []Row
	works := false
	for _, mode := range []network.Mode{network.Legacy, network.NFT} {
		var parts []string
		total, ok, broken := 0, 0, 0
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
	return append(rows, c.dockerDNS(f))
}

// dockerDNS is the row of where Docker's embedded-DNS redirect lives: an
// iptables backend, or a native nftables table (Docker 29's nftables
// firewall backend).
func (c *checker) dockerDNS(f network.IptablesFacts) Row {
	const name = "docker-dns"
	n := f.Native
	if n.NotRun != "" {
		return Row{name, Pass, "iptables: " + n.NotRun, ""}
	}
	if d, ok := n.Docker(); ok {
		return Row{name, Pass, fmt.Sprintf("native nftables: table ip %s (udp %d, tcp %d); table ip %s serves it at the host IP",
			d.Table, d.UDPPort, d.TCPPort, network.NativeTable), ""}
	}
	m, err := c.st.Magic.Get()
	uses := err == nil && m.NamesEmbeddedDNS()
	switch {
	case !uses:
		return Row{name, Pass, "none: the node does not use Docker's embedded DNS", ""}
	case system.NotInstalled(n.Err):
		return Row{name, Fail, "no iptables backend holds its rules, and nft is not installed: a native nftables redirect cannot be seen",
			"install Debian's nftables package in the node image: Docker's nftables firewall backend (Docker 29+) writes the redirect there"}
	case n.Err != nil:
		return Row{name, Fail, "no iptables backend holds its rules, and nft failed: " + n.Err.Error(),
			"a native nftables redirect (Docker 29's nftables firewall backend) cannot be seen"}
	}
	return Row{name, Fail, "nowhere: no iptables backend nor the native ruleset sends to 127.0.0.11, which " + network.ResolvConf + " names",
		"the node and its pods cannot use Docker's DNS: see the node's log (step enable_network_magic)"}
}

// magicFacts is what enable_network_magic detected, or the hint and error
// of the rows that show it: it decides from select_iptables' answers, so
// when those could not be read it did not look.
func (c *checker) magicFacts() (network.MagicFacts, string, error) {
	if _, err := c.st.Iptables.Get(); err != nil {
		return network.MagicFacts{}, "see iptables-mode", fmt.Errorf("not looked at: %w", err)
	}
	f, err := c.st.Magic.Get()
	return f, unreadableHint, err
}

func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || system.TimedOut(err)
}

// names is the rows of enable_network_magic's lookups: the Docker host, the
// node's own name, the default gateway.
func (c *checker) names() []Row {
	f, hint, err := c.magicFacts()
	if err != nil {
		return failRows(err, hint, "host-docker-internal", "node-name", "default-gateway")
	}
	gw := f.Gateway.Value.IsValid()
	docker := network.UsableHostIP(f.DockerHost.Value)
	var rows []Row

	const hdi = "host-docker-internal"
	switch {
	case errors.Is(f.DockerHost.Err, network.ErrDockerHostNotNeeded):
		rows = append(rows, Row{hdi, Pass, "not needed: the node does not use Docker's embedded DNS", ""})
	case docker:
		rows = append(rows, Row{hdi, Pass, f.DockerHost.Value.String() + ": pods use the host's DNS through it", ""})
	case timedOut(f.DockerHost.Err):
		rows = append(rows, Row{hdi, Warn, fmt.Sprintf("%v", f.DockerHost.Err),
			"the lookup delays every boot by its timeout: fix the node's DNS (/etc/resolv.conf)"})
	case gw:
		obs := fmt.Sprintf("not found (%v)", f.DockerHost.Err)
		switch v := f.DockerHost.Value; {
		case v.IsLoopback():
			obs = v.String() + " is loopback, not the host"
		case v.IsValid():
			obs = v.String() + " names no host"
		}
		rows = append(rows, Row{hdi, Pass, obs + "; the default gateway " + f.Gateway.Value.String() + " is used instead", ""})
	default:
		rows = append(rows, Row{hdi, Warn, fmt.Sprintf("not usable (%v), and no default gateway", f.DockerHost.Err),
			"pods cannot reach Docker's DNS: give the node a default route, or --add-host=host.docker.internal:host-gateway"})
	}

	const nn = "node-name"
	obs := fmt.Sprintf("%s: IPv4 %s, IPv6 %s", f.Hostname, nodeAddrOrWhy(f.IPv4.Addr, f.IPv4.Iface, f.IPv4.Err), nodeAddrOrWhy(f.IPv6.Addr, f.IPv6.Iface, f.IPv6.Err))
	switch {
	case f.Hostname == "":
		rows = append(rows, Row{nn, Warn, "the node has no hostname", "kind names each node: check the container's --hostname"})
	case !f.IPv4.Addr.IsValid() && f.IPv4.Old != nil:
		rows = append(rows, Row{nn, Fail, fmt.Sprintf("%s; the last boot recorded IPv4 %s", obs, *f.IPv4.Old),
			"the entrypoint stops: it cannot follow the address change. The node's name must resolve to its address (Docker's embedded DNS, /etc/hosts), or its default route's interface hold one"})
	case f.IPv4.Iface != "" || f.IPv6.Iface != "":
		// kind #3989: followed all the same, but the name is wrong.
		rows = append(rows, Row{nn, Warn, obs,
			"the node's name does not resolve to its address (nerdctl rootless, kind #3989): the entrypoint follows the default route's interface; give the node its name with its current address in /etc/hosts"})
	case f.IPv4.Addr.IsValid() && f.IPv4.Err != nil || f.IPv6.Addr.IsValid() && f.IPv6.Err != nil:
		// The name's stale answer, kept for want of another.
		rows = append(rows, Row{nn, Warn, obs,
			"the node's name resolves to an address on none of its interfaces, and no default route gives another: the entrypoint uses it all the same; fix the name's entry (/etc/hosts, the engine's DNS)"})
	case timedOut(f.IPv4.Err) || timedOut(f.IPv6.Err):
		rows = append(rows, Row{nn, Warn, obs, "the lookup delays every boot by its timeout: fix the node's DNS (/etc/resolv.conf)"})
	case !f.IPv4.Addr.IsValid() && !f.IPv6.Addr.IsValid():
		rows = append(rows, Row{nn, Warn, obs,
			"the node's name must resolve to its own address (not loopback) for the entrypoint to follow an address change after a restart"})
	case !f.IPv6.Addr.IsValid() && f.IPv6.Old != nil:
		rows = append(rows, Row{nn, Warn, fmt.Sprintf("%s; the last boot recorded IPv6 %s", obs, *f.IPv6.Old),
			"the node's files keep the old IPv6 address"})
	default:
		rows = append(rows, Row{nn, Pass, obs, ""})
	}

	const dg = "default-gateway"
	switch {
	case gw:
		rows = append(rows, Row{dg, Pass, f.Gateway.Value.String(), ""})
	case docker:
		rows = append(rows, Row{dg, Pass, fmt.Sprintf("none (%v); host.docker.internal is used", f.Gateway.Err), ""})
	default:
		rows = append(rows, Row{dg, Warn, fmt.Sprintf("none (%v)", f.Gateway.Err),
			"without a default route (an internal network) nor host.docker.internal, the DNS rules and resolv.conf are left as they are"})
	}
	return rows
}

// nodeAddrOrWhy is a node address of MagicFacts with its source, or why
// there is none.
func nodeAddrOrWhy(addr netip.Addr, iface string, err error) string {
	switch {
	case iface != "":
		return fmt.Sprintf("%s from the default route's interface %s (%v)", addr, iface, err)
	case addr.IsValid() && err != nil:
		return fmt.Sprintf("%s (%v)", addr, err)
	case addr.IsValid():
		return addr.String()
	case err != nil:
		return "none (" + err.Error() + ")"
	}
	return "none"
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
