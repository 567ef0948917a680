package podnet

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
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

// replyTimeout bounds each wait for the kernel's answer to a netlink
// request, so that a lost reply fails the preflight instead of hanging it.
const replyTimeout = 5 * time.Second

// The netlink package's settings for the sockets it opens per request
// (this package, the only user of netlink in the binary, uses no Handle):
// a bounded wait for each reply, and the kernel's own words for a
// refusal (NETLINK_EXT_ACK, Linux 4.12+) in the error.
func init() {
	_ = netlink.SetSocketTimeout(replyTimeout) // fails only below 1 µs
	nl.EnableErrorMessageReporting = true
}

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
// tears it down. The host is the calling thread's network namespace (a
// caller in another one than the process's keeps its thread locked). It
// needs CAP_NET_ADMIN and CAP_SYS_ADMIN there (see Capable).
func Preflight(ctx context.Context, o Options) (res Result, err error) {
	start := time.Now()
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.inject == nil {
		o.inject = func(string) error { return nil }
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	stage := stageNamespace
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: %w", stage, err)
		}
		res.Elapsed = time.Since(start)
	}()

	res.PodIP = o.PodIP
	if !res.PodIP.IsValid() {
		res.PodIP = randomAddr(podPrefix)
	}
	suffix := randomHex(4)
	res.HostVeth = "kpfh" + suffix
	peerName := "kpfp" + suffix

	host, err := currentNS()
	if err != nil {
		return res, err
	}
	defer host.Close()
	pod, err := newNS(host)
	if err != nil {
		return res, err
	}
	// Deferred first, so run last: after every socket made in the
	// namespace is closed, this ends it.
	defer pod.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(pod), &st); err != nil {
		return res, fmt.Errorf("fstat the pod namespace: %w", err)
	}
	res.NSInode = st.Ino
	if err := o.inject(stage); err != nil {
		return res, err
	}

	// The host's requests go out from this thread, in the host's
	// namespace; the pod's from a thread in the pod's (inNS).
	stage = stageVeth
	if err := netlink.LinkAdd(newVeth(res.HostVeth, peerName)); err != nil {
		return res, fmt.Errorf("netlink: create veth pair %s/%s: %w", res.HostVeth, peerName, err)
	}
	// Deleting the host end deletes the peer too, wherever it is.
	defer func() { err = errors.Join(err, removeLink(res.HostVeth)) }()
	hostLink, err := linkByName(res.HostVeth)
	if err != nil {
		return res, err
	}
	hostMAC := hostLink.Attrs().HardwareAddr
	if len(hostMAC) != 6 {
		return res, fmt.Errorf("%s has no Ethernet address (%x)", res.HostVeth, []byte(hostMAC))
	}
	peer, err := linkByName(peerName)
	if err != nil {
		return res, err
	}
	if err := o.inject(stage); err != nil {
		return res, err
	}

	stage = stageMove
	if err := netlink.LinkSetNsFd(peer, int(pod)); err != nil {
		return res, fmt.Errorf("netlink: move link %s to the pod's network namespace: %w", peerName, err)
	}
	if err := o.inject(stage); err != nil {
		return res, err
	}

	stage = stagePod
	if err := inNS(pod, func() error { return wirePod(peerName, res.PodIP, hostMAC) }); err != nil {
		return res, err
	}
	if err := o.inject(stage); err != nil {
		return res, err
	}

	stage = stageHost
	if err := netlink.LinkSetUp(hostLink); err != nil {
		return res, fmt.Errorf("netlink: set link %s up: %w", res.HostVeth, err)
	}
	toPod := &netlink.Route{LinkIndex: hostLink.Attrs().Index, Dst: hostNet(res.PodIP), Scope: netlink.SCOPE_LINK, Protocol: unix.RTPROT_STATIC}
	if err := netlink.RouteAdd(toPod); err != nil {
		return res, fmt.Errorf("netlink: add route %s dev %s: %w", toPod.Dst, res.HostVeth, err)
	}
	// Before the link goes (which would take the route with it): the
	// route is removed on its own, and checked gone.
	defer func() { err = errors.Join(err, removeRoute(toPod)) }()
	if err := o.inject(stage); err != nil {
		return res, err
	}

	// Traffic waits for both ends to be running: until the kernel's
	// link watcher (which runs at most once a second) has seen the
	// carrier, a veth drops what it is given, and the first SYN would
	// only go through on its retransmission, a second later.
	if err := waitRunning(ctx, res.HostVeth); err != nil {
		return res, err
	}
	if err := inNS(pod, func() error { return waitRunning(ctx, "eth0") }); err != nil {
		return res, err
	}

	stage = stageToPod
	hostIP, err := exchange(ctx, pod, host, res.PodIP, false)
	if err != nil {
		return res, err
	}
	res.HostIP = hostIP
	if err := o.inject(stage); err != nil {
		return res, err
	}

	stage = stageToHost
	if _, err := exchange(ctx, host, pod, hostIP, true); err != nil {
		return res, err
	}
	return res, o.inject(stage)
}

// wirePod sets up the pod's side as a CNI plugin does, from a thread in
// the pod's namespace: eth0 with a /32, a link-scoped route to the
// gateway, the default route via it, and the gateway's MAC fixed to the
// host veth's.
func wirePod(peerName string, ip netip.Addr, hostMAC net.HardwareAddr) error {
	lo, err := linkByName("lo")
	if err != nil {
		return err
	}
	eth, err := linkByName(peerName)
	if err != nil {
		return err
	}
	index := eth.Attrs().Index
	for _, r := range []struct {
		what string
		do   func() error
	}{
		{"set link lo up", func() error { return netlink.LinkSetUp(lo) }},
		{"rename link " + peerName + " to eth0", func() error { return netlink.LinkSetName(eth, "eth0") }},
		{"set link eth0 up", func() error { return netlink.LinkSetUp(eth) }},
		{"add address " + ip.String() + "/32 to eth0", func() error {
			return netlink.AddrAdd(eth, &netlink.Addr{IPNet: hostNet(ip)})
		}},
		{"add route " + Gateway.String() + "/32 dev eth0", func() error {
			return netlink.RouteAdd(&netlink.Route{LinkIndex: index, Dst: hostNet(Gateway), Scope: netlink.SCOPE_LINK, Protocol: unix.RTPROT_STATIC})
		}},
		{"add route default via " + Gateway.String() + " dev eth0", func() error {
			return netlink.RouteAdd(&netlink.Route{LinkIndex: index, Gw: Gateway.AsSlice(), Scope: netlink.SCOPE_UNIVERSE, Protocol: unix.RTPROT_STATIC})
		}},
		{"add neighbour " + Gateway.String() + " on eth0", func() error {
			return netlink.NeighAdd(&netlink.Neigh{LinkIndex: index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT, IP: Gateway.AsSlice(), HardwareAddr: hostMAC})
		}},
	} {
		if err := r.do(); err != nil {
			return fmt.Errorf("netlink: %s: %w", r.what, err)
		}
	}
	return nil
}

// newVeth is a veth pair, name and its peer, both down, with the kernel's
// defaults (NewLinkAttrs: no queue length or namespace id set).
func newVeth(name, peer string) *netlink.Veth {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	veth := netlink.NewVeth(attrs)
	veth.PeerName = peer
	return veth
}

// hostNet is ip as a /32 (or /128) network.
func hostNet(ip netip.Addr) *net.IPNet {
	return &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}
}

// linkByName returns a link of the calling thread's namespace by name.
func linkByName(name string) (netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("netlink: get link %s: %w", name, err)
	}
	return l, nil
}

// linkGone reports whether err says that a link does not exist.
func linkGone(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}

// waitRunning polls a link of the calling thread's namespace until it is
// operationally up (IFF_RUNNING).
func waitRunning(ctx context.Context, name string) error {
	for {
		l, err := linkByName(name)
		if err != nil {
			return err
		}
		if l.Attrs().RawFlags&unix.IFF_RUNNING != 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("link %s is not running: %w", name, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// removeLink deletes a link of the calling thread's namespace and checks
// that it is gone.
func removeLink(name string) error {
	l, err := netlink.LinkByName(name)
	if err == nil {
		err = netlink.LinkDel(l)
	}
	if err != nil && !linkGone(err) {
		return fmt.Errorf("cleanup: netlink: delete link %s: %w", name, err)
	}
	if _, err := netlink.LinkByName(name); !linkGone(err) {
		return fmt.Errorf("cleanup: link %s is still there after deleting it (%v)", name, err)
	}
	return nil
}

// removeRoute deletes a route of the calling thread's namespace (ESRCH:
// it is gone already) and checks that no route to its destination through
// its link is left in the main table.
func removeRoute(r *netlink.Route) error {
	if err := netlink.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("cleanup: netlink: delete route %s dev %d: %w", r.Dst, r.LinkIndex, err)
	}
	left, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: r.Dst, LinkIndex: r.LinkIndex}, netlink.RT_FILTER_DST|netlink.RT_FILTER_OIF)
	if err != nil {
		return fmt.Errorf("cleanup: netlink: list routes: %w", err)
	}
	if len(left) > 0 {
		return fmt.Errorf("cleanup: route %s dev %d is still there after deleting it", r.Dst, r.LinkIndex)
	}
	return nil
}

// randomHex is n random bytes in hex (crypto/rand.Read never fails).
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// randomAddr picks a host address of an IPv4 prefix of /30 or wider,
// neither its network nor its broadcast address.
func randomAddr(p netip.Prefix) netip.Addr {
	var b [4]byte
	rand.Read(b[:])
	size := uint32(1) << (32 - p.Bits())
	base := p.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(base[:]) + binary.BigEndian.Uint32(b[:])%(size-2) + 1
	return netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, v)))
}
