package podnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// Gateway is the pod's default gateway: a link-local address no host
// interface holds, resolved by a permanent neighbour entry (Calico's
// choice).
var Gateway = netip.MustParseAddr("169.254.1.1")

// podPrefix is where the pod's address is drawn from: TEST-NET-2
// (RFC 5737), reserved for documentation, so it names nothing real. It is
// held only inside the pod namespace; the host gets a /32 route to it for
// the few milliseconds of the check.
var podPrefix = netip.MustParsePrefix("198.51.100.0/24")

// DefaultTimeout bounds a whole preflight.
const DefaultTimeout = 10 * time.Second

// Options tune a preflight; the zero value is what `entrypoint check` uses.
type Options struct {
	// PodIP is the pod's address; invalid picks one at random in
	// 198.51.100.0/24.
	PodIP netip.Addr
	// Timeout bounds the whole preflight; 0 means DefaultTimeout.
	Timeout time.Duration

	// inject, in tests, is called after each stage; its error fails the
	// preflight there, to show that cleanup covers every stage.
	inject func(stage string) error
}

// Result describes a preflight.
type Result struct {
	HostVeth string
	PodIP    netip.Addr
	// HostIP is the source address the host reached the pod from (its
	// own address, as the kubelet's probes would use).
	HostIP  netip.Addr
	Elapsed time.Duration
	// NSInode identifies the pod namespace (nsfs inode), so that tests can
	// check nothing refers to it any more.
	NSInode uint64
}

// Summary says in one line what was proven.
func (r Result) Summary() string {
	return fmt.Sprintf("host %s <-> pod %s via veth %s: TCP both ways in %d ms, all removed",
		r.HostIP, r.PodIP, r.HostVeth, r.Elapsed.Milliseconds())
}

// Stages, in order; a failure names the stage it happened in.
const (
	stageNamespace = "pod network namespace"
	stageVeth      = "veth pair"
	stageMove      = "move veth into the pod"
	stagePod       = "pod interface, address, routes, neighbour"
	stageHost      = "host veth and route to the pod"
	stageToPod     = "TCP host -> pod"
	stageToHost    = "TCP pod -> host"
)

// Preflight wires a pod network in a throwaway namespace, proves it, and
// tears it down. The host is the calling thread's network namespace. It
// needs CAP_NET_ADMIN and CAP_SYS_ADMIN there (see Capable).
func Preflight(ctx context.Context, o Options) (res Result, err error) {
	start := time.Now()
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stage := stageNamespace
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: %w", stage, err)
		}
		res.Elapsed = time.Since(start)
	}()
	done := func(s string) error {
		if o.inject != nil {
			return o.inject(s)
		}
		return nil
	}

	res.PodIP = o.PodIP
	if !res.PodIP.IsValid() {
		if res.PodIP, err = randomAddr(podPrefix); err != nil {
			return res, err
		}
	}
	suffix, err := randomHex(4)
	if err != nil {
		return res, err
	}
	res.HostVeth = "kpfh" + suffix
	peerName := "kpfp" + suffix

	host, err := currentNS()
	if err != nil {
		return res, err
	}
	defer unix.Close(host)
	pod, err := newNS(host)
	if err != nil {
		return res, err
	}
	// Deferred first, so run last: after every socket made in the
	// namespace is closed, this ends it.
	defer unix.Close(pod)
	var st unix.Stat_t
	if err := unix.Fstat(pod, &st); err != nil {
		return res, fmt.Errorf("fstat the pod namespace: %w", err)
	}
	res.NSInode = st.Ino
	hnl, err := dial(host)
	if err != nil {
		return res, err
	}
	defer hnl.close()
	pnl, err := dial(pod)
	if err != nil {
		return res, err
	}
	defer pnl.close()
	if err := done(stage); err != nil {
		return res, err
	}

	stage = stageVeth
	if _, err := hnl.do(newVeth(res.HostVeth, peerName)); err != nil {
		return res, err
	}
	// Deleting the host end deletes the peer too, wherever it is.
	defer func() { err = errors.Join(err, removeLink(hnl, res.HostVeth)) }()
	hostLink, err := hnl.link(res.HostVeth)
	if err != nil {
		return res, err
	}
	if len(hostLink.mac) != 6 {
		return res, fmt.Errorf("%s has no Ethernet address (%x)", res.HostVeth, hostLink.mac)
	}
	peer, err := hnl.link(peerName)
	if err != nil {
		return res, err
	}
	if err := done(stage); err != nil {
		return res, err
	}

	stage = stageMove
	if _, err := hnl.do(moveLink(peer.index, pod)); err != nil {
		return res, err
	}
	if err := done(stage); err != nil {
		return res, err
	}

	stage = stagePod
	if err := wirePod(pnl, peerName, res.PodIP, hostLink.mac); err != nil {
		return res, err
	}
	if err := done(stage); err != nil {
		return res, err
	}

	stage = stageHost
	if _, err := hnl.do(setLinkUp(hostLink.index)); err != nil {
		return res, err
	}
	toPod := route{dst: netip.PrefixFrom(res.PodIP, 32), dev: hostLink.index, scope: unix.RT_SCOPE_LINK}
	if _, err := hnl.do(newRoute(toPod)); err != nil {
		return res, err
	}
	// Before the link goes (which would take the route with it): the
	// route is removed on its own, and checked gone.
	defer func() { err = errors.Join(err, removeRoute(hnl, toPod)) }()
	if err := done(stage); err != nil {
		return res, err
	}

	// Traffic waits for both ends to be running: until the kernel's
	// link watcher (which runs at most once a second) has seen the
	// carrier, a veth drops what it is given, and the first SYN would
	// only go through on its retransmission, a second later.
	if err := waitRunning(ctx, hnl, res.HostVeth); err != nil {
		return res, err
	}
	if err := waitRunning(ctx, pnl, "eth0"); err != nil {
		return res, err
	}

	stage = stageToPod
	hostIP, err := exchange(ctx, pod, host, res.PodIP, false)
	if err != nil {
		return res, err
	}
	res.HostIP = hostIP
	if err := done(stage); err != nil {
		return res, err
	}

	stage = stageToHost
	if _, err := exchange(ctx, host, pod, hostIP, true); err != nil {
		return res, err
	}
	return res, done(stage)
}

// wirePod sets up the pod's side as a CNI plugin does: eth0 with a /32,
// a link-scoped route to the gateway, the default route via it, and the
// gateway's MAC fixed to the host veth's.
func wirePod(c *conn, peerName string, ip netip.Addr, hostMAC []byte) error {
	lo, err := c.link("lo")
	if err != nil {
		return err
	}
	if _, err := c.do(setLinkUp(lo.index)); err != nil {
		return err
	}
	eth, err := c.link(peerName)
	if err != nil {
		return err
	}
	for _, r := range []request{
		renameLink(eth.index, "eth0"),
		setLinkUp(eth.index),
		newAddr(eth.index, netip.PrefixFrom(ip, 32)),
		newRoute(route{dst: netip.PrefixFrom(Gateway, 32), dev: eth.index, scope: unix.RT_SCOPE_LINK}),
		newRoute(route{dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), gw: Gateway, dev: eth.index, scope: unix.RT_SCOPE_UNIVERSE}),
		newNeigh(eth.index, Gateway, hostMAC),
	} {
		if _, err := c.do(r); err != nil {
			return err
		}
	}
	return nil
}

// waitRunning polls a link until it is operationally up (IFF_RUNNING).
func waitRunning(ctx context.Context, c *conn, name string) error {
	for {
		l, err := c.link(name)
		if err != nil {
			return err
		}
		if l.flags&unix.IFF_RUNNING != 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("link %s is not running: %w", name, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// removeLink deletes a link and checks that it is gone.
func removeLink(c *conn, name string) error {
	if _, err := c.do(delLink(name)); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("cleanup: %w", err)
	}
	if _, err := c.link(name); !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("cleanup: link %s is still there after deleting it (%v)", name, err)
	}
	return nil
}

// removeRoute deletes a route (ESRCH: it is gone already) and checks that
// no route to its destination through its link is left in the main table.
func removeRoute(c *conn, r route) error {
	if _, err := c.do(delRoute(r)); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("cleanup: %w", err)
	}
	msgs, err := c.do(dumpRequest(unix.RTM_GETROUTE, rtmsg(unix.AF_INET, 0, 0, 0, 0, 0), "dump routes"))
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	for _, m := range msgs {
		if got, ok := parseRoute(m); ok && got == r {
			return fmt.Errorf("cleanup: route %s is still there after deleting it", r)
		}
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// randomAddr picks a host address of an IPv4 prefix of /30 or wider,
// neither its network nor its broadcast address.
func randomAddr(p netip.Prefix) (netip.Addr, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return netip.Addr{}, err
	}
	hostBits := 32 - p.Bits()
	size := uint32(1) << hostBits
	n := native.Uint32(b[:])%(size-2) + 1
	base := p.Masked().Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}
