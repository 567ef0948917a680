//go:build e2e && docker29

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// The Docker 29 tier (test/docker29, make e2e-docker29): test/docker29/run.sh
// starts a Docker 29 engine of its own with one firewall backend
// (D29_BACKEND: nftables or iptables) and runs TestDocker29 against it.
// On a user-defined network, a node of our image and one of kind's script
// (the differential tier's reference image) boot, are asked for DNS from
// the node and from a pod-like network namespace inside it, are restarted
// and asked again. Every cell is measured before any is judged, so that a
// run prints the whole table (and writes its rows to D29_TABLE) even when
// a cell fails.

// d29Cell is what one boot of one node showed.
type d29Cell struct {
	boot           string // "running", or how it ended: "exit 20: ERROR: ..."
	nameserver     string // resolv.conf's first nameserver
	dnsNode        string // "ok", "fails", or which transport failed
	dnsPod         string
	booted, nodeOK bool
	podOK          bool
}

// d29Row is one node of the table: before and after `docker restart`.
type d29Row struct {
	backend, image string
	first, restart d29Cell
}

// The pod-like namespace's link: the node's end, the namespace's end, and
// their addresses (a range no Docker network of the engine uses).
const (
	d29PodNS   = "d29pod"
	d29Veth    = "d29veth"
	d29NodeNet = "10.244.77.1/24"
	d29PodAddr = "10.244.77.2/24"
	d29NodeIP  = "10.244.77.1"
	d29Helper  = "/usr/local/bin/dnsquery"
)

func TestDocker29(t *testing.T) {
	backend := tier.MustEnv(t, "D29_BACKEND", "test/docker29/run.sh sets it (nftables or iptables)")
	if got := strings.TrimSpace(mustDocker(t, "info", "--format", "{{.FirewallBackend.Driver}}")); got != backend {
		t.Fatalf("the engine's firewall backend is %q, D29_BACKEND says %q", got, backend)
	}
	helper := buildDNSQuery(t)
	images := map[string]string{"ours": nodeImage, "script": buildReferenceImage(t)}
	net := newNetwork(t, "d29")
	// The peer: a container (no node: nothing to dump) whose name only
	// Docker's DNS knows.
	peer := namePrefix + runID + "-peer"
	mustDocker(t, "run", "--detach", "--name", peer, "--network", net.Name, "--label", labelKey+"="+runID,
		"--entrypoint", "sleep", nodeImage, "infinity")
	t.Cleanup(func() {
		if _, err := dockerCmd(time.Minute, "rm", "--force", peer); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	peerIP := strings.TrimSpace(mustDocker(t, "inspect", "-f",
		fmt.Sprintf("{{(index .NetworkSettings.Networks %q).IPAddress}}", net.Name), peer))

	order := []string{"ours", "script"}
	rows := make([]d29Row, len(order))
	for i, image := range order {
		none := d29Cell{boot: "not measured", nameserver: "–", dnsNode: "–", dnsPod: "–"}
		rows[i] = d29Row{backend: backend, image: image, first: none, restart: none}
	}
	t.Run("nodes", func(t *testing.T) {
		for i, image := range order {
			t.Run(image, func(t *testing.T) {
				t.Parallel()
				n := startNode(t, net, "d29-"+image, nodeOpts{image: images[image]})
				probe := d29Probe{n: n, helper: helper, peer: peer, peerIP: peerIP}
				row := rows[i]
				row.first = probe.measure()
				if _, err := tier.Run(3*time.Minute, nil, "docker", "restart", n.Name); err != nil {
					t.Errorf("%s: %v", n.Name, err)
				}
				row.restart = probe.measure()
				rows[i] = row
				row.judge(t)
			})
		}
	})
	var table strings.Builder
	for _, r := range rows {
		table.WriteString(r.markdown())
	}
	t.Logf("Docker %s, firewall backend %s:\n%s", strings.TrimSpace(mustDocker(t, "info", "--format", "{{.ServerVersion}}")), backend, table.String())
	if out := os.Getenv("D29_TABLE"); out != "" {
		if err := os.WriteFile(out, []byte(table.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// judge fails t where the row differs from what is expected today: on the
// iptables backend both images boot and resolve; on nftables kind's script
// boots and loses DNS (Docker's redirect is in a native table it does not
// read); ours must boot and resolve there too (issue 51).
func (r d29Row) judge(t *testing.T) {
	t.Helper()
	wantDNS := !(r.backend == "nftables" && r.image == "script")
	for _, c := range []struct {
		when string
		cell d29Cell
	}{{"first boot", r.first}, {"after restart", r.restart}} {
		if !c.cell.booted {
			t.Errorf("%s/%s, %s: want the node running, got %s", r.backend, r.image, c.when, c.cell.boot)
			continue
		}
		if c.cell.nodeOK != wantDNS || c.cell.podOK != wantDNS {
			t.Errorf("%s/%s, %s: DNS from the node %s, from the pod %s; want both %s",
				r.backend, r.image, c.when, c.cell.dnsNode, c.cell.dnsPod, map[bool]string{true: "ok", false: "failing"}[wantDNS])
		}
	}
}

// markdown is the row of the tier's table.
func (r d29Row) markdown() string {
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.backend, r.image,
		r.first.boot, r.first.nameserver, r.first.dnsNode, r.first.dnsPod,
		r.restart.boot, r.restart.dnsNode, r.restart.dnsPod)
}

// d29Probe measures one node: its boot, its resolv.conf and ruleset, and
// DNS from it and from a pod-like namespace in it. It fails nothing: what
// went wrong is written in the cell and logged.
type d29Probe struct {
	n            *node
	helper       string
	peer, peerIP string
}

func (p d29Probe) measure() d29Cell {
	n := p.n
	c := d29Cell{nameserver: "–", dnsNode: "–", dnsPod: "–"}
	took, problem := n.PollRunning(bootLimit)
	if problem != "" {
		c.boot = p.ended(problem)
		n.T.Logf("%s: %s", n.Name, c.boot)
		return c
	}
	c.boot, c.booted = "running", true
	n.T.Logf("%s: systemd running after %v", n.Name, took.Round(time.Millisecond))
	resolv, err := n.ExecErr("cat", "/etc/resolv.conf")
	ns := tier.ResolvLines(resolv, "nameserver")
	if err != nil || len(ns) == 0 {
		c.nameserver = fmt.Sprintf("none (%v)", err)
		return c
	}
	server := strings.Fields(ns[0])[1]
	c.nameserver = server
	rules, err := n.ExecErr("nft", "list", "ruleset")
	// A pod's packets DNATed to 127.0.0.11 are routed only where
	// route_localnet allows it (or the engine makes it so): logged, so
	// that the pod cells can be read against it.
	localnet, _ := n.ExecErr("cat", "/proc/sys/net/ipv4/conf/all/route_localnet")
	n.T.Logf("%s: resolv.conf:\n%s\nnft list ruleset (err %v):\n%s\nroute_localnet (all): %s", n.Name, resolv, err, rules, strings.TrimSpace(localnet))
	if _, err := tier.Run(time.Minute, nil, "docker", "cp", p.helper, n.Name+":"+d29Helper); err != nil {
		c.dnsNode = "helper not copied"
		n.T.Log(err)
		return c
	}
	c.dnsNode, c.nodeOK = p.lookups("node", server)
	if err := p.podNamespace(); err != nil {
		c.dnsPod = "no pod namespace"
		n.T.Logf("%s: %v", n.Name, err)
		return c
	}
	c.dnsPod, c.podOK = p.lookups("pod", server, "ip", "netns", "exec", d29PodNS)
	return c
}

// ended says how a node that did not reach running ended: its exit code
// and its last ERROR line, or the wait's own problem.
func (p d29Probe) ended(problem string) string {
	n := p.n
	state, err := tier.Run(time.Minute, nil, "docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", n.Name)
	f := strings.Fields(state)
	if err != nil || len(f) != 2 || f[0] != "exited" {
		return strings.SplitN(problem, "\n", 2)[0]
	}
	out := "exit " + f[1]
	logs, _ := n.Log()
	for _, l := range strings.Split(logs, "\n") {
		if i := strings.Index(l, "ERROR:"); i >= 0 {
			out = "exit " + f[1] + ": " + strings.TrimSpace(l[i:])
		}
	}
	return out
}

// lookups asks server for the peer's name over UDP and over TCP, with the
// helper run through prefix (nothing: in the node), and says how that went.
func (p d29Probe) lookups(where, server string, prefix ...string) (string, bool) {
	var failed []string
	for _, proto := range []string{"udp", "tcp"} {
		argv := append(append([]string{}, prefix...), d29Helper, "-server", server, "-proto", proto, p.peer)
		out, err := p.n.ExecWithin(30*time.Second, argv...)
		ok := err == nil && strings.Contains("\n"+out, "\n"+p.peerIP+"\n")
		p.n.T.Logf("%s: DNS from the %s, %s to %s:53 for %s: ok=%v %q (err %v)", p.n.Name, where, proto, server, p.peer, ok, out, err)
		if !ok {
			failed = append(failed, proto)
		}
	}
	switch len(failed) {
	case 0:
		return "ok", true
	case 2:
		return "fails", false
	}
	return failed[0] + " fails", false
}

// podNamespace makes a pod-like network namespace in the node, as a CNI
// plugin would: a veth pair, an address at each end, a default route via
// the node's end. Made anew at each boot (the node's /run is a tmpfs).
func (p d29Probe) podNamespace() error {
	for _, argv := range [][]string{
		{"ip", "netns", "add", d29PodNS},
		{"ip", "link", "add", d29Veth, "type", "veth", "peer", "name", "eth0", "netns", d29PodNS},
		{"ip", "addr", "add", d29NodeNet, "dev", d29Veth},
		{"ip", "link", "set", d29Veth, "up"},
		{"ip", "-n", d29PodNS, "addr", "add", d29PodAddr, "dev", "eth0"},
		{"ip", "-n", d29PodNS, "link", "set", "lo", "up"},
		{"ip", "-n", d29PodNS, "link", "set", "eth0", "up"},
		{"ip", "-n", d29PodNS, "route", "add", "default", "via", d29NodeIP},
	} {
		if _, err := p.n.ExecErr(argv...); err != nil {
			return err
		}
	}
	return nil
}

// buildDNSQuery builds the DNS client (./dnsquery), static, for the nodes.
func buildDNSQuery(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dnsquery")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./dnsquery")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./dnsquery: %v\n%s", err, b)
	}
	return out
}
