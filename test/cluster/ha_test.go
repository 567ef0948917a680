//go:build cluster && matrix

package cluster

// This file holds the ha shapes' stages after their restarts of every
// node (kind#1689, issue 55): every container in reverse order, one
// control plane restarted alone (several times), and the snapshot case,
// with the checks only an HA cluster has: etcd's members back in the
// cluster by their own logs, kind-etcd-peer-nat.service following a peer
// that moved, a write through each API server, and what etcd's peer TLS
// relies on (the node's name in its peer certificate, resolved by
// Docker's DNS).

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The ha stages' counts: how many times one control plane restarts alone
// (a whole number from 1; 3 when unset), and whether the snapshot stage
// runs ("1": in every ha shape; "0": in none; unset: in the shapes whose
// snapshot field is set, the IPv4 ha shape).
const (
	envHASingle   = "CLUSTER_MATRIX_HA_SINGLE"
	envHASnapshot = "CLUSTER_MATRIX_HA_SNAPSHOT"
)

// haPlan is what haRestarts runs on an ha shape's cluster.
type haPlan struct {
	single   int  // restarts of control-plane2 alone
	snapshot bool // the snapshot stage (and its kubeadm patch at create)
}

// newHAPlan is sh's plan from the environment (TestMatrix reads it once).
func newHAPlan(t *testing.T, sh shape, single int, snapshotEnv string) haPlan {
	t.Helper()
	if !sh.ha {
		return haPlan{}
	}
	p := haPlan{single: single, snapshot: sh.snapshot}
	switch snapshotEnv {
	case "":
	case "0":
		p.snapshot = false
	case "1":
		p.snapshot = true
	default:
		t.Fatalf("%s=%q: want 0 or 1", envHASnapshot, snapshotEnv)
	}
	return p
}

// snapshotPatch lowers, in the snapshot stage's clusters, how far etcd's
// leader keeps its raft log behind its latest snapshot, so that a few
// hundred writes leave a stopped member behind the log's start: the leader
// must then send it a snapshot. etcd v3.6 snapshots its raft log in memory
// every 100 applied entries whatever the flags, and compacts it to
// snapshot-catchup-entries (5000 by default) before that snapshot;
// snapshot-count (10000) is when it also writes one to disk. kind v0.30.0
// writes kubeadm's v1beta3 for Kubernetes 1.23 and later (its
// pkg/cluster/internal/kubeadm/config.go), where extraArgs is a map; the
// apiVersion is named so that a kind writing another version leaves the
// patch out rather than misreading it, and the stage's first check
// (snapshotArgs) then says so.
const snapshotPatch = `kind: ClusterConfiguration
apiVersion: kubeadm.k8s.io/v1beta3
etcd:
  local:
    extraArgs:
      snapshot-count: "100"
      snapshot-catchup-entries: "100"
`

// snapshotArgs are the flags snapshotPatch gives etcd's static pods.
var snapshotArgs = []string{"--snapshot-count=100", "--snapshot-catchup-entries=100"}

// snapshotWrites is how many ConfigMaps the snapshot stage writes while a
// member is stopped: with the log compacted to 100 entries behind a
// snapshot every 100, 500 writes (one raft entry each, besides the
// cluster's own) leave the member at least 300 entries before the log's
// start.
const snapshotWrites = 500

// moveLimit: how long after a control plane's start every other control
// plane's kind-etcd-peer-nat.service may take to log that it moved (its
// watcher looks every peer up every 5 s).
const moveLimit = 60 * time.Second

// haRestarts runs an HA cluster through its further stages, each ending in
// every check again, and returns the table's last column, "reverse
// pass|FAIL, one K/N (Ready in MEDIAN), snapshot pass|FAIL" (the snapshot
// part only with plan.snapshot; the times from each single restart's
// start to the restarted node's Ready):
//   - every container in reverse order (the load balancer, the worker, the
//     last control plane first, ..., the first control plane last), 15 s
//     apart, every address new: etcd's first members to start find no peer
//     at all for a while, and the unit of each must map the peers that
//     start after it;
//   - control-plane2 alone, plan.single times, its old address squatted,
//     the others left running: each other control plane's unit must log
//     its move within moveLimit, its etcd back in the cluster by its own
//     log and the others' (comeBack);
//   - with plan.snapshot, control-plane3 stopped while the cluster writes
//     past the leader's log, then started at a new address: the leader's
//     snapshot must reach it there (snapshotCatchUp).
func (c *cluster) haRestarts(t *testing.T, plan haPlan) string {
	all := slices.Clone(c.nodes)
	if c.lb != "" {
		all = append(all, c.lb)
	}
	slices.Reverse(all)
	reverse := passed(t.Run("restart-reverse", func(t *testing.T) {
		since := c.restartInOrder(t, all, 15*time.Second)
		c.readySince(t, since, restartLimit+time.Minute)
		c.checkAll(t, "after-restart-reverse")
		c.checkPeerCerts(t, "after-restart-reverse")
		c.recordEtcd(t, "after-restart-reverse")
	}))
	ok := 0
	var ready []time.Duration
	for i := 1; i <= plan.single; i++ {
		if t.Run(fmt.Sprintf("restart-one-control-plane-%d", i), func(t *testing.T) {
			cp := c.nodes[1]
			since := c.restartInOrder(t, []string{cp}, 0)
			_, took := c.comeBack(t, fmt.Sprintf("after-restart-one%d", i), cp, since)
			ready = append(ready, took)
		}) {
			ok++
		}
	}
	more := fmt.Sprintf("reverse %s, one %d/%d (Ready in %s)", reverse, ok, plan.single, median(ready))
	if plan.snapshot {
		more += ", snapshot " + passed(t.Run("snapshot", c.snapshotCatchUp))
	}
	return more
}

// comeBack checks the cluster after control plane node, alone, started
// at since at a new address, and returns its etcd member ID ("" when its
// log names none) and how long it took to report Ready: every other control plane's unit logged the move in
// time; every node Ready, the restarted one with a heartbeat since, the
// others with their leases renewed since; every check of checkAll; the
// peer certificates; etcd's log on node and on each other control plane
// shows node back in the cluster; a write through each API server.
func (c *cluster) comeBack(t *testing.T, stage, node string, since time.Time) (id string, ready time.Duration) {
	t.Helper()
	defer c.recordEtcd(t, stage)
	// first, as the record matters most when the rest fails; the
	// journal's times decide, so Ready is timed right all the same
	c.checkPeersFollowed(t, stage, node, since)
	ready = c.readySince(t, since, restartLimit, node)
	c.checkLeasesSince(t, stage, since)
	c.checkAll(t, stage)
	c.checkPeerCerts(t, stage)
	id = c.checkMemberBack(t, stage, node, since)
	c.checkWrites(t, stage)
	return id, ready
}

// snapshotCatchUp is the snapshot stage: etcd runs with snapshotArgs;
// control-plane3 is stopped and its addresses held, snapshotWrites
// ConfigMaps are written through control-plane1's own API server, and
// control-plane3 starts at a new address. Then, besides comeBack's
// checks: its etcd applied a snapshot from the leader ("applied incoming
// Raft snapshot"), another member sent it one ("sent database snapshot"
// to its ID: a connection only the leader opens, to its recorded address,
// which the leader's unit must have redirected), and a read through its
// own API server returns the last ConfigMap written.
func (c *cluster) snapshotCatchUp(t *testing.T) {
	const stage = "after-snapshot"
	for _, cp := range c.nodes[:c.controlPlanes] {
		manifest, err := c.cli(time.Minute, nil, "exec", cp, "cat", "/etc/kubernetes/manifests/etcd.yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, arg := range snapshotArgs {
			if !strings.Contains(manifest, arg) {
				t.Fatalf("%s: etcd runs without %s: the kubeadmConfigPatches entry (kubeadm v1beta3) did not apply:\n%s", cp, arg, manifest)
			}
		}
	}
	cp, writer := c.nodes[2], c.nodes[0]
	old := c.stopAndHold(t, []string{cp})
	var items strings.Builder
	for i := 1; i <= snapshotWrites; i++ {
		fmt.Fprintf(&items, "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: ha-snapshot-%d\n    namespace: default\n  data:\n    v: %q\n", i, strconv.Itoa(i))
	}
	last, lastValue := fmt.Sprintf("ha-snapshot-%d", snapshotWrites), strconv.Itoa(snapshotWrites)
	start := time.Now()
	// server-side apply: a repeat after a lost connection or a leader
	// change (control-plane3 may have led) writes nothing twice
	if err := c.eventually(3*time.Minute, func() error {
		out, err := c.kubectlOn(t, 5*time.Minute, writer, "apiVersion: v1\nkind: List\nitems:\n"+items.String(), "apply", "--server-side", "-f", "-")
		if err != nil {
			return fmt.Errorf("%w\n%s", err, lastLines(out, 5))
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: writing %d ConfigMaps through %s's API server: %v", stage, snapshotWrites, writer, err)
	}
	t.Logf("%s: %d ConfigMaps written through %s's API server in %v, %s stopped", stage, snapshotWrites, writer,
		time.Since(start).Round(time.Second), cp)
	since := c.startInOrder(t, []string{cp}, old, 0)
	id, _ := c.comeBack(t, stage, cp, since)
	err := c.eventually(2*time.Minute, func() error {
		evs, err := c.etcdLog(cp, since)
		if err != nil {
			return err
		}
		if id == "" {
			if id = memberID(evs); id == "" {
				return fmt.Errorf("%s's etcd log since its start names no local-member-id", cp)
			}
		}
		applied, ok := findEvent(evs, "applied incoming Raft snapshot", "", "")
		if !ok {
			return fmt.Errorf("%s's etcd (%s) logged no \"applied incoming Raft snapshot\" since its start: it caught up without one, or not at all", cp, id)
		}
		for _, other := range c.otherControlPlanes(cp) {
			evs, err := c.etcdLog(other, since)
			if err != nil {
				return err
			}
			if sent, ok := findEvent(evs, "sent database snapshot", "remote-peer-id", id); ok {
				t.Logf("%s: %s sent %s's etcd (%s) a snapshot at %s (index %s); it applied one at %s", stage, other, cp, id,
					sent.at.Format(time.RFC3339Nano), applied.fields["snapshot-index"], applied.at.Format(time.RFC3339Nano))
				return nil
			}
		}
		return fmt.Errorf("no other member logged \"sent database snapshot\" to %s (%s) since its start", cp, id)
	})
	if err != nil {
		t.Errorf("%s: %v", stage, err)
	}
	if err := c.eventually(2*time.Minute, func() error {
		out, err := c.kubectlOn(t, time.Minute, cp, "", "get", "configmap", last, "-o", "jsonpath={.data.v}")
		if err == nil && out != lastValue {
			err = fmt.Errorf("%s holds %q, want %q", last, out, lastValue)
		}
		return err
	}); err != nil {
		t.Errorf("%s: the last ConfigMap written, through %s's own API server: %v", stage, cp, err)
	}
}

// restartInOrder stops containers, holds each one's addresses with a
// throwaway (stopAndHold, as restartWithNewIPs does), and starts them
// again (startInOrder).
func (c *cluster) restartInOrder(t *testing.T, containers []string, gap time.Duration) time.Time {
	t.Helper()
	return c.startInOrder(t, containers, c.stopAndHold(t, containers), gap)
}

// startInOrder starts the containers stopAndHold stopped one at a time,
// in the order given, gap apart, and returns when the first started.
// Every container must come back at new addresses (old: stopAndHold's).
func (c *cluster) startInOrder(t *testing.T, containers []string, old map[string][]netip.Addr, gap time.Duration) time.Time {
	t.Helper()
	started := time.Now()
	for i, n := range containers {
		if i > 0 {
			time.Sleep(gap)
		}
		if _, err := c.cli(3*time.Minute, nil, "start", n); err != nil {
			t.Fatal(err)
		}
	}
	c.requireNewAddrs(t, containers, old)
	return started
}

// otherControlPlanes are the control planes but node.
func (c *cluster) otherControlPlanes(node string) []string {
	return slices.DeleteFunc(slices.Clone(c.nodes[:c.controlPlanes]), func(n string) bool { return n == node })
}

// checkPeersFollowed: the kind-etcd-peer-nat.service of every control
// plane but moved (which started at since) logged, within moveLimit of
// since, that moved's peer address moved to its new one (the watcher of
// internal/etcdpeers). Their lines since then go to the log and to
// CLUSTER_LOG_DIR/NAME-STAGE-peer-nat.txt.
func (c *cluster) checkPeersFollowed(t *testing.T, stage, moved string, since time.Time) {
	t.Helper()
	to := c.nodeAddr(t, moved, c.families()[0])
	var b strings.Builder
	for _, cp := range c.otherControlPlanes(moved) {
		var lines []journalLine
		// the journal's times decide: polled a little past the limit for
		// the journal's own delay, or once when that has passed
		err := c.eventually(max(time.Until(since.Add(moveLimit+15*time.Second)), time.Second), func() error {
			out, err := c.cli(time.Minute, nil, "exec", cp, "journalctl", "--no-pager", "-q", "-o", "json",
				"-u", "kind-etcd-peer-nat.service", "--since", fmt.Sprintf("@%d", since.Unix()))
			if err != nil {
				return err
			}
			lines = journalLines(out)
			for _, l := range lines {
				if movedTo(l.msg, moved, to) && !l.at.After(since.Add(moveLimit)) {
					return nil
				}
			}
			return fmt.Errorf("no line \"etcd peer %s moved: ... -> %s\" within %v of its start", moved, netip.AddrPortFrom(to, 2380), moveLimit)
		})
		fmt.Fprintf(&b, "$ %s exec %s journalctl -u kind-etcd-peer-nat.service --since @%d\n", c.engine, cp, since.Unix())
		for _, l := range lines {
			fmt.Fprintf(&b, "%s (+%v) %s\n", l.at.UTC().Format(time.RFC3339Nano), l.at.Sub(since).Round(time.Millisecond), l.msg)
		}
		if err != nil {
			t.Errorf("%s: %s's kind-etcd-peer-nat.service: %v", stage, cp, err)
		}
	}
	t.Logf("%s: kind-etcd-peer-nat.service on the control planes that kept running:\n%s", stage, b.String())
	if err := os.WriteFile(filepath.Join(c.logDir, c.name+"-"+stage+"-peer-nat.txt"), []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
}

// checkLeasesSince: every node's kubelet renewed its lease since the time
// given (every 10 s): the nodes that kept running talk to the API server
// after the restart too, where their Ready heartbeat is only written
// every 5 minutes (readySince).
func (c *cluster) checkLeasesSince(t *testing.T, stage string, since time.Time) {
	t.Helper()
	err := c.eventually(time.Minute, func() error {
		out, err := c.kubectl("", "get", "leases", "-n", "kube-node-lease", "-o",
			`jsonpath={range .items[*]}{.metadata.name}{" "}{.spec.renewTime}{"\n"}{end}`)
		if err != nil {
			return err
		}
		if stale := staleLeases(out, c.nodes, since); len(stale) > 0 {
			return fmt.Errorf("leases of %v not renewed since %s:\n%s", stale, since.UTC().Format(time.RFC3339), out)
		}
		return nil
	})
	if err != nil {
		t.Errorf("%s: %v", stage, err)
	}
}

// checkMemberBack: node's etcd, started at since, is back in the cluster
// by its own log (it published itself through raft: a commit, so a
// quorum with it) and by every other control plane's ("peer became
// active" with its ID). It returns node's member ID, "" when its log
// names none.
func (c *cluster) checkMemberBack(t *testing.T, stage, node string, since time.Time) string {
	t.Helper()
	var id string
	var seen []string
	err := c.eventually(2*time.Minute, func() error {
		evs, err := c.etcdLog(node, since)
		if err != nil {
			return err
		}
		if id = memberID(evs); id == "" {
			return fmt.Errorf("%s's etcd log since its start names no local-member-id", node)
		}
		published, ok := findEvent(evs, "published local member to cluster through raft", "", "")
		if !ok {
			return fmt.Errorf("%s's etcd (%s) has not published itself to the cluster since its start", node, id)
		}
		seen = []string{fmt.Sprintf("%s published itself at %s", node, published.at.Format(time.RFC3339Nano))}
		for _, other := range c.otherControlPlanes(node) {
			evs, err := c.etcdLog(other, since)
			if err != nil {
				return err
			}
			active, ok := findEvent(evs, "peer became active", "peer-id", id)
			if !ok {
				return fmt.Errorf("%s's etcd has not logged \"peer became active\" for %s (%s) since its start", other, node, id)
			}
			seen = append(seen, fmt.Sprintf("%s: peer %s active at %s", other, id, active.at.Format(time.RFC3339Nano)))
		}
		return nil
	})
	if err != nil {
		t.Errorf("%s: etcd member %s back in the cluster: %v", stage, node, err)
	} else {
		t.Logf("%s: etcd member %s (%s) back in the cluster: %s", stage, node, id, strings.Join(seen, "; "))
	}
	return id
}

// etcdLog is node's etcd log since the time given (kubectl logs
// --since-time), the container before the current one's too: a member
// whose etcd restarted after the node did logged its return in that one.
func (c *cluster) etcdLog(node string, since time.Time) ([]etcdEvent, error) {
	args := []string{"-n", "kube-system", "logs", "etcd-" + node, "--since-time=" + since.UTC().Format(time.RFC3339)}
	log, err := c.kubectl("", args...)
	if err != nil {
		return nil, fmt.Errorf("kubectl logs etcd-%s: %w\n%s", node, err, lastLines(log, 3))
	}
	// no previous container is no error: the lines are the current one's
	if previous, err := c.kubectl("", append(args, "--previous")...); err == nil {
		log = previous + "\n" + log
	}
	return etcdEvents(log), nil
}

// checkWrites: a ConfigMap written through each control plane's own API
// server (its address, not the load balancer's) is read back through the
// next one's.
func (c *cluster) checkWrites(t *testing.T, stage string) {
	t.Helper()
	cps := c.nodes[:c.controlPlanes]
	for i, cp := range cps {
		via := cps[(i+1)%len(cps)]
		name, value := fmt.Sprintf("ha-write-%s-%d", stage, i+1), strconv.FormatInt(time.Now().UnixNano(), 10)
		manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: default\ndata:\n  v: %q\n", name, value)
		if err := c.eventually(time.Minute, func() error {
			out, err := c.kubectlOn(t, time.Minute, cp, manifest, "apply", "--server-side", "-f", "-")
			if err != nil {
				return fmt.Errorf("%w\n%s", err, out)
			}
			return nil
		}); err != nil {
			t.Errorf("%s: a write through %s's API server: %v", stage, cp, err)
			continue
		}
		if err := c.eventually(time.Minute, func() error {
			out, err := c.kubectlOn(t, time.Minute, via, "", "get", "configmap", name, "-o", "jsonpath={.data.v}")
			if err == nil && out != value {
				err = fmt.Errorf("got %q, want %q", out, value)
			}
			return err
		}); err != nil {
			t.Errorf("%s: %s, written through %s's API server, read through %s's: %v", stage, name, cp, via, err)
			continue
		}
		t.Logf("%s: %s written through %s's API server, read back through %s's", stage, name, cp, via)
	}
}

// kubectlOn runs kubectl in node against node's own API server, at its
// address of the cluster's first family (its certificate lists it), with
// the admin kubeconfig's credentials, for at most timeout.
func (c *cluster) kubectlOn(t *testing.T, timeout time.Duration, node, stdin string, args ...string) (string, error) {
	t.Helper()
	server := "https://" + netip.AddrPortFrom(c.nodeAddr(t, node, c.families()[0]), 6443).String()
	argv := []string{"exec"}
	var in []byte
	if stdin != "" {
		argv, in = append(argv, "-i"), []byte(stdin)
	}
	argv = append(argv, node, "kubectl", "--kubeconfig=/etc/kubernetes/admin.conf", "--server="+server)
	return c.cli(timeout, in, append(argv, args...)...)
}

// checkPeerCerts: what etcd's peer TLS relies on after an address change.
// etcd checks a peer's client certificate against the connection's source
// address, then against the addresses its DNS names resolve to; the
// certificate holds the node's address at kubeadm join, and with the
// redirects (or a peer that dials from its new address) the source is
// the new one. So each control plane's etcd peer certificate must list
// its node's name (kubeadm puts it there), and that name must resolve,
// on another control plane (Docker's DNS, through the node's
// resolv.conf), to its current address.
func (c *cluster) checkPeerCerts(t *testing.T, stage string) {
	t.Helper()
	cps := c.nodes[:c.controlPlanes]
	for i, cp := range cps {
		cert, err := c.nodeCert(cp, "/etc/kubernetes/pki/etcd/peer.crt")
		if err != nil {
			t.Errorf("%s: %s: etcd peer certificate: %v", stage, cp, err)
		} else if !slices.Contains(cert.DNSNames, cp) {
			t.Errorf("%s: %s: etcd peer certificate's DNS names %v lack the node's name (IPs %v): etcd cannot accept its connections from a new address", stage, cp, cert.DNSNames, cert.IPAddresses)
		}
		other, addr := cps[(i+1)%len(cps)], c.nodeAddr(t, cp, c.families()[0])
		var out string
		if err := c.eventually(30*time.Second, func() error {
			var err error
			out, err = c.cli(time.Minute, nil, "exec", other, "getent", "ahosts", cp)
			if err == nil && !containsAddr(out, addr) {
				err = fmt.Errorf("%q lacks %s", strings.TrimSpace(out), addr)
			}
			return err
		}); err != nil {
			t.Errorf("%s: %s resolves %s: %v", stage, other, cp, err)
		}
	}
}

// recordEtcd writes, for the note of kind#1689, what each control plane's
// kind-etcd-peer-nat.service logged (the script's image has none) and
// the lines of each control plane's etcd log that name an elected leader, to
// CLUSTER_LOG_DIR/NAME-STAGE-etcd.txt. It fails nothing: the checks do.
func (c *cluster) recordEtcd(t *testing.T, stage string) {
	t.Helper()
	var b strings.Builder
	for _, cp := range c.nodes[:c.controlPlanes] {
		out, err := c.cli(time.Minute, nil, "exec", cp, "journalctl", "--no-pager", "-o", "short-precise", "-u", "kind-etcd-peer-nat.service")
		fmt.Fprintf(&b, "$ %s exec %s journalctl -u kind-etcd-peer-nat.service (error: %v)\n%s\n", c.engine, cp, err, out)
	}
	// The etcd image here is etcd alone (no etcdctl): its own log says
	// whether a leader was elected, and who.
	for _, cp := range c.nodes[:c.controlPlanes] {
		logs, err := c.kubectl("", "-n", "kube-system", "logs", "etcd-"+cp)
		var leader []string
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "elected leader") || strings.Contains(l, "became leader") {
				leader = append(leader, l)
			}
		}
		fmt.Fprintf(&b, "$ kubectl -n kube-system logs etcd-%s | grep -e 'elected leader' -e 'became leader' (error: %v)\n%s\n", cp, err, strings.Join(leader, "\n"))
	}
	t.Logf("%s, etcd:\n%s", stage, b.String())
	if err := os.WriteFile(filepath.Join(c.logDir, c.name+"-"+stage+"-etcd.txt"), []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
}
