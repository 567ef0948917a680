package podnet

// Privileged: the preflight for real, as root, inside a network namespace
// of the test's own that stands in for the node, so that the machine's own
// links and routes are never touched. The machine's namespace is compared
// before and after all the same.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

func TestMain(m *testing.M) { nstest.Main(m) }

// machineState is the machine's network namespace, read on a thread that
// is in it.
func machineState(t *testing.T) []string {
	t.Helper()
	var s []string
	var err error
	nstest.OnHost(func() { s, err = nstest.Network() })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nodeState is the stand-in node's network namespace, this thread's.
func nodeState(t *testing.T) []string {
	t.Helper()
	s, err := nstest.Network()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nodeAddr is the stand-in node's own address (TEST-NET-3).
var nodeAddr = netip.MustParseAddr("203.0.113.10")

// standInNode moves the test into a new network namespace and gives it
// what a node has: lo up, and an interface with an address.
func standInNode(t *testing.T) {
	t.Helper()
	nstest.Unshare(t, unix.CLONE_NEWNET)
	// No IPv6 here: its link-local addresses and routes come up a while
	// after a link does, which would make the namespace change under the
	// test on its own. (/proc/sys/net is the opening thread's namespace.)
	for _, p := range []string{"all", "default"} {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+p+"/disable_ipv6", []byte("1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The node's eth0 as Docker makes it: one end of a veth pair (the
	// kernel here has no dummy driver).
	if err := netlink.LinkAdd(newVeth("node0", "node0peer")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lo", "node0", "node0peer"} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		if name == "node0" {
			if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: nodeAddr.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// requireNSGone checks that nothing in this process refers to the pod
// namespace any more: no descriptor, no thread.
// requireLeftNothing fails when the node's namespace differs from before
// (what names the run that left something), or when the preflight's own
// namespace, inode, is still referenced.
func requireLeftNothing(t *testing.T, before []string, inode uint64, what string) {
	t.Helper()
	if diff := cmp.Diff(before, nodeState(t)); diff != "" {
		t.Errorf("%s (-before +after):\n%s", what, diff)
	}
	requireNSGone(t, inode)
}

func requireNSGone(t *testing.T, inode uint64) {
	t.Helper()
	if inode == 0 {
		t.Fatal("the preflight did not report its namespace")
	}
	want := fmt.Sprintf("net:[%d]", inode)
	var refs []string
	for _, pattern := range []string{"/proc/self/fd/*", "/proc/self/task/*/ns/net"} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			if l, err := os.Readlink(p); err == nil && l == want {
				refs = append(refs, p)
			}
		}
	}
	if len(refs) > 0 {
		t.Errorf("the pod namespace %s is still referenced by %s", want, strings.Join(refs, ", "))
	}
}

// qemuNetlink is why the pod-network preflight is not run under qemu-user.
const qemuNetlink = "qemu-user 7.2 does not translate every rtnetlink message: the pod network's neighbour entry (RTM_NEWNEIGH) fails with EOPNOTSUPP"

// standIn makes this test's network namespace a stand-in node (root
// only), and returns the machine's own namespace and the node's, before.
func standIn(t *testing.T) (machine, node []string) {
	t.Helper()
	nstest.RequireRoot(t)
	nstest.SkipEmulated(t, qemuNetlink)
	machine = machineState(t)
	standInNode(t)
	return machine, nodeState(t)
}

// requireMachineUnchanged fails when the machine's own network namespace
// differs from before.
func requireMachineUnchanged(t *testing.T, before []string) {
	t.Helper()
	if diff := cmp.Diff(before, machineState(t)); diff != "" {
		t.Errorf("the machine's own network namespace changed (-before +after):\n%s", diff)
	}
}

func TestPreflight(t *testing.T) {
	machineBefore, before := standIn(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Preflight(ctx, Options{})
	if err != nil {
		t.Fatalf("preflight: %v", err)
	}
	t.Log(res.Summary())
	if res.HostIP != nodeAddr {
		t.Errorf("the host reached the pod from %s, want the node's address %s", res.HostIP, nodeAddr)
	}
	if !podPrefix.Contains(res.PodIP) || !strings.HasPrefix(res.HostVeth, "kpfh") {
		t.Errorf("result %+v", res)
	}

	requireLeftNothing(t, before, res.NSInode, "the preflight left something in the node's namespace")
	requireMachineUnchanged(t, machineBefore)
}

// TestPreflightFailures fails the preflight after each stage in turn, and
// once by a real refusal of the kernel: every time, everything it made is
// gone afterwards, and nothing else.
func TestPreflightFailures(t *testing.T) {
	machineBefore, before := standIn(t)
	ctx := context.Background()
	stages := []string{stageNamespace, stageVeth, stageMove, stagePod, stageHost, stageToPod, stageToHost}
	injected := errors.New("injected failure")
	for _, stage := range stages {
		o := Options{inject: func(s string) error {
			if s == stage {
				return injected
			}
			return nil
		}}
		res, err := Preflight(ctx, o)
		if !errors.Is(err, injected) || !strings.HasPrefix(err.Error(), stage+": ") {
			t.Errorf("failing after %q: got %v", stage, err)
		}
		if diff := cmp.Diff(before, nodeState(t)); diff != "" {
			t.Errorf("failing after %q left (-before +after):\n%s", stage, diff)
		}
		requireNSGone(t, res.NSInode)
	}

	// A real refusal: the node already routes the pod's address, so the
	// host route cannot be added (EEXIST). The preflight fails, removes
	// what it made, and leaves the node's own route alone.
	podIP := netip.MustParseAddr("198.51.100.9")
	node0, err := netlink.LinkByName("node0")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: node0.Attrs().Index, Dst: hostNet(podIP), Scope: netlink.SCOPE_LINK}); err != nil {
		t.Fatal(err)
	}
	before = nodeState(t)
	res, err := Preflight(ctx, Options{PodIP: podIP})
	if !errors.Is(err, unix.EEXIST) || !strings.HasPrefix(err.Error(), stageHost+": ") {
		t.Errorf("with the pod address routed already: got %v, want EEXIST in stage %q", err, stageHost)
	}
	requireLeftNothing(t, before, res.NSInode, "a refused request left")

	// Out of time in the middle: the deadline stops the TCP exchange.
	// Not at a random address: 1 in 254 was 198.51.100.9, which node0
	// routes now, and the preflight failed on that instead (EEXIST).
	res, err = Preflight(ctx, Options{Timeout: time.Nanosecond, PodIP: podIP.Next()})
	if !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("with no time: got %v, want a deadline error", err)
	}
	requireLeftNothing(t, before, res.NSInode, "a timed-out preflight left")

	requireMachineUnchanged(t, machineBefore)
}
