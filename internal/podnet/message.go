package podnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// The rtnetlink messages the preflight sends, built and parsed here as plain
// bytes (pure functions, table-tested); conn.go only moves them through the
// socket. Netlink uses the host's byte order.

var native = binary.NativeEndian

// vethInfoPeer is VETH_INFO_PEER of <linux/veth.h>, which x/sys/unix lacks:
// inside IFLA_INFO_DATA of a veth, it carries the peer's struct ifinfomsg
// followed by the peer's own attributes.
const vethInfoPeer = 1

// attr is one netlink attribute: a payload, or nested attributes.
type attr struct {
	typ    uint16
	data   []byte
	nested []attr
}

func align4(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// appendAttrs encodes attributes: each a struct rtattr (length, type), its
// payload, and padding to 4 bytes that the length does not count.
func appendAttrs(b []byte, attrs []attr) []byte {
	for _, a := range attrs {
		start := len(b)
		b = native.AppendUint16(b, 0) // length, set below
		b = native.AppendUint16(b, a.typ)
		b = append(b, a.data...)
		b = appendAttrs(b, a.nested)
		native.PutUint16(b[start:], uint16(len(b)-start))
		for len(b) < align4(len(b)) {
			b = append(b, 0)
		}
	}
	return b
}

func strAttr(typ uint16, s string) attr { return attr{typ: typ, data: append([]byte(s), 0)} }

func u32Attr(typ uint16, v uint32) attr { return attr{typ: typ, data: native.AppendUint32(nil, v)} }

func addrAttr(typ uint16, a netip.Addr) attr { return attr{typ: typ, data: a.AsSlice()} }

func nest(typ uint16, attrs ...attr) attr { return attr{typ: typ, nested: attrs} }

// request is one netlink request: a message type, flags, the fixed header
// of that family (struct ifinfomsg, rtmsg, ...) and attributes.
type request struct {
	typ   uint16
	flags uint16
	head  []byte
	attrs []attr
	// what names the request in errors ("create veth kpfh0a1b2c3d").
	what string
}

// encode renders the request as one netlink message with sequence seq.
func (r request) encode(seq uint32) []byte {
	b := make([]byte, unix.SizeofNlMsghdr, 128)
	b = append(b, r.head...)
	for len(b) < align4(len(b)) {
		b = append(b, 0)
	}
	b = appendAttrs(b, r.attrs)
	native.PutUint32(b[0:], uint32(len(b)))
	native.PutUint16(b[4:], r.typ)
	native.PutUint16(b[6:], r.flags)
	native.PutUint32(b[8:], seq)
	native.PutUint32(b[12:], 0) // the kernel fills in our port id
	return b
}

// ifinfomsg is struct ifinfomsg.
func ifinfomsg(family uint8, index int32, flags, change uint32) []byte {
	b := []byte{family, 0}
	b = native.AppendUint16(b, 0) // ifi_type
	b = native.AppendUint32(b, uint32(index))
	b = native.AppendUint32(b, flags)
	return native.AppendUint32(b, change)
}

// ifaddrmsg is struct ifaddrmsg.
func ifaddrmsg(family, prefixLen, flags, scope uint8, index int32) []byte {
	b := []byte{family, prefixLen, flags, scope}
	return native.AppendUint32(b, uint32(index))
}

// rtmsg is struct rtmsg; struct fib_rule_hdr has the same size and, for
// a dump request, the same first byte (the family).
func rtmsg(family, dstLen, table, protocol, scope, typ uint8) []byte {
	b := []byte{family, dstLen, 0, 0, table, protocol, scope, typ}
	return native.AppendUint32(b, 0)
}

// ndmsg is struct ndmsg.
func ndmsg(family uint8, index int32, state uint16) []byte {
	b := []byte{family, 0, 0, 0}
	b = native.AppendUint32(b, uint32(index))
	b = native.AppendUint16(b, state)
	return append(b, 0, 0) // ndm_flags, ndm_type
}

const (
	create = unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_EXCL
	change = unix.NLM_F_REQUEST | unix.NLM_F_ACK
	dump   = unix.NLM_F_REQUEST | unix.NLM_F_DUMP
)

// newVeth creates a veth pair in the namespace of the socket: name and its
// peer, both down.
func newVeth(name, peer string) request {
	peerInfo := append(ifinfomsg(unix.AF_UNSPEC, 0, 0, 0), appendAttrs(nil, []attr{strAttr(unix.IFLA_IFNAME, peer)})...)
	return request{
		typ: unix.RTM_NEWLINK, flags: create, head: ifinfomsg(unix.AF_UNSPEC, 0, 0, 0),
		attrs: []attr{
			strAttr(unix.IFLA_IFNAME, name),
			nest(unix.IFLA_LINKINFO,
				attr{typ: unix.IFLA_INFO_KIND, data: []byte("veth")},
				nest(unix.IFLA_INFO_DATA, attr{typ: vethInfoPeer, data: peerInfo})),
		},
		what: fmt.Sprintf("create veth pair %s/%s", name, peer),
	}
}

// getLink asks for one link by name.
func getLink(name string) request { return namedLink(unix.RTM_GETLINK, name, "get link") }

// namedLink is a request of type typ about the link called name.
func namedLink(typ uint16, name, what string) request {
	return request{
		typ: typ, flags: change, head: ifinfomsg(unix.AF_UNSPEC, 0, 0, 0),
		attrs: []attr{strAttr(unix.IFLA_IFNAME, name)},
		what:  what + " " + name,
	}
}

// setLinkUp sets a link administratively up.
func setLinkUp(index int32) request {
	return request{
		typ: unix.RTM_NEWLINK, flags: change, head: ifinfomsg(unix.AF_UNSPEC, index, unix.IFF_UP, unix.IFF_UP),
		what: fmt.Sprintf("set link %d up", index),
	}
}

// renameLink renames a link, which must be down.
func renameLink(index int32, name string) request {
	return request{
		typ: unix.RTM_NEWLINK, flags: change, head: ifinfomsg(unix.AF_UNSPEC, index, 0, 0),
		attrs: []attr{strAttr(unix.IFLA_IFNAME, name)},
		what:  fmt.Sprintf("rename link %d to %s", index, name),
	}
}

// moveLink moves a link into the network namespace open as nsFD.
func moveLink(index int32, nsFD int) request {
	return request{
		typ: unix.RTM_NEWLINK, flags: change, head: ifinfomsg(unix.AF_UNSPEC, index, 0, 0),
		attrs: []attr{u32Attr(unix.IFLA_NET_NS_FD, uint32(nsFD))},
		what:  fmt.Sprintf("move link %d to another network namespace", index),
	}
}

// delLink deletes a link by name; deleting one end of a veth pair deletes
// the other, wherever it is.
func delLink(name string) request { return namedLink(unix.RTM_DELLINK, name, "delete link") }

// newAddr adds an IPv4 address to a link.
func newAddr(index int32, p netip.Prefix) request {
	return request{
		typ: unix.RTM_NEWADDR, flags: create,
		head:  ifaddrmsg(unix.AF_INET, uint8(p.Bits()), 0, unix.RT_SCOPE_UNIVERSE, index),
		attrs: []attr{addrAttr(unix.IFA_LOCAL, p.Addr()), addrAttr(unix.IFA_ADDRESS, p.Addr())},
		what:  fmt.Sprintf("add address %s to link %d", p, index),
	}
}

// route is one IPv4 route of the main table.
type route struct {
	dst   netip.Prefix
	gw    netip.Addr // invalid: a direct route
	dev   int32
	scope uint8
}

func (r route) String() string {
	s := r.dst.String()
	if r.gw.IsValid() {
		s += " via " + r.gw.String()
	}
	return fmt.Sprintf("%s dev %d", s, r.dev)
}

func (r route) request(typ uint16, flags uint16, verb string) request {
	attrs := []attr{u32Attr(unix.RTA_OIF, uint32(r.dev))}
	if r.dst.Bits() > 0 {
		attrs = append([]attr{addrAttr(unix.RTA_DST, r.dst.Addr())}, attrs...)
	}
	if r.gw.IsValid() {
		attrs = append(attrs, addrAttr(unix.RTA_GATEWAY, r.gw))
	}
	return request{
		typ: typ, flags: flags,
		head:  rtmsg(unix.AF_INET, uint8(r.dst.Bits()), unix.RT_TABLE_MAIN, unix.RTPROT_STATIC, r.scope, unix.RTN_UNICAST),
		attrs: attrs,
		what:  verb + " route " + r.String(),
	}
}

func newRoute(r route) request { return r.request(unix.RTM_NEWROUTE, create, "add") }

func delRoute(r route) request { return r.request(unix.RTM_DELROUTE, change, "delete") }

// newNeigh adds a permanent neighbour entry: ip is at mac on the link.
func newNeigh(index int32, ip netip.Addr, mac []byte) request {
	return request{
		typ: unix.RTM_NEWNEIGH, flags: create, head: ndmsg(unix.AF_INET, index, unix.NUD_PERMANENT),
		attrs: []attr{addrAttr(unix.NDA_DST, ip), {typ: unix.NDA_LLADDR, data: mac}},
		what:  fmt.Sprintf("add neighbour %s on link %d", ip, index),
	}
}

// dumpRequest asks for every object of a kind; head is the family header
// with the family set (AF_UNSPEC for all).
func dumpRequest(typ uint16, head []byte, what string) request {
	return request{typ: typ, flags: dump, head: head, what: what}
}

// message is one received netlink message.
type message struct {
	typ   uint16
	flags uint16
	seq   uint32
	data  []byte // after the header
}

// parseMessages splits a datagram into its messages.
func parseMessages(b []byte) ([]message, error) {
	var out []message
	err := splitRecords(b, unix.SizeofNlMsghdr, func(b []byte) int { return int(native.Uint32(b)) }, "a header", "message", func(rec []byte) {
		out = append(out, message{
			typ:   native.Uint16(rec[4:]),
			flags: native.Uint16(rec[6:]),
			seq:   native.Uint32(rec[8:]),
			data:  rec[unix.SizeofNlMsghdr:],
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// splitRecords walks b as netlink lays out both messages and attributes:
// records one after another, each starting with a header of hdr bytes in
// which length reads the record's length (header included), each padded to
// 4 bytes. each gets every record, header included, without padding.
// short ("a header") and what ("message") name the record in errors.
func splitRecords(b []byte, hdr int, length func([]byte) int, short, what string, each func(rec []byte)) error {
	for len(b) > 0 {
		if len(b) < hdr {
			return fmt.Errorf("netlink: %d trailing bytes, shorter than %s", len(b), short)
		}
		n := length(b)
		if n < hdr || n > len(b) {
			return fmt.Errorf("netlink: %s length %d out of range (%d bytes left)", what, n, len(b))
		}
		each(b[:n])
		b = b[min(align4(n), len(b)):]
	}
	return nil
}

// rawAttr is one received attribute.
type rawAttr struct {
	typ  uint16 // without the NLA_F_NESTED and NLA_F_NET_BYTEORDER bits
	data []byte
}

// parseAttrs splits a run of attributes.
func parseAttrs(b []byte) ([]rawAttr, error) {
	var out []rawAttr
	err := splitRecords(b, unix.SizeofRtAttr, func(b []byte) int { return int(native.Uint16(b)) }, "an attribute", "attribute", func(rec []byte) {
		out = append(out, rawAttr{typ: native.Uint16(rec[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER), data: rec[unix.SizeofRtAttr:]})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// attrsAfter parses the attributes that follow a fixed header of size n.
func attrsAfter(data []byte, n int) ([]rawAttr, error) {
	if len(data) < n {
		return nil, fmt.Errorf("netlink: message of %d bytes, shorter than its %d-byte header", len(data), n)
	}
	return parseAttrs(data[align4(n):])
}

// Error is a request the kernel refused.
type Error struct {
	What  string
	Errno syscall.Errno
	// Msg is the kernel's extended ack message, when it gave one.
	Msg string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("netlink: %s: %v", e.What, e.Errno)
	if e.Msg != "" {
		s += " (" + e.Msg + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Errno }

// parseAck reads an NLMSG_ERROR message: nil for an ack (error 0), else the
// errno and, with NETLINK_EXT_ACK, the kernel's message.
func parseAck(m message, what string) error {
	if len(m.data) < unix.SizeofNlMsgerr {
		return fmt.Errorf("netlink: %s: short error message (%d bytes)", what, len(m.data))
	}
	code := int32(native.Uint32(m.data))
	if code == 0 {
		return nil
	}
	e := &Error{What: what, Errno: syscall.Errno(-code)}
	if m.flags&unix.NLM_F_ACK_TLVS == 0 {
		return e
	}
	// The request is echoed after the error code: its header only when
	// NLM_F_CAPPED, else in full.
	off := unix.SizeofNlMsgerr
	if m.flags&unix.NLM_F_CAPPED == 0 {
		orig := int(native.Uint32(m.data[4:]))
		off = 4 + align4(orig)
	}
	if off > len(m.data) {
		return e
	}
	tlvs, err := parseAttrs(m.data[off:])
	if err != nil {
		return e
	}
	for _, a := range tlvs {
		if a.typ == unix.NLMSGERR_ATTR_MSG {
			e.Msg = string(trimNUL(a.data))
		}
	}
	return e
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// parseRoute reads an IPv4 route of the main table from an RTM_NEWROUTE
// message, as far as a route value holds it; ok is false for others.
func parseRoute(m message) (r route, ok bool) {
	attrs, err := attrsAfter(m.data, unix.SizeofRtMsg)
	if err != nil || m.typ != unix.RTM_NEWROUTE || m.data[0] != unix.AF_INET {
		return route{}, false
	}
	table := uint32(m.data[4])
	dst := netip.IPv4Unspecified()
	for _, a := range attrs {
		switch a.typ {
		case unix.RTA_TABLE:
			table = u32(a.data)
		case unix.RTA_DST:
			if ip, ok := netip.AddrFromSlice(a.data); ok {
				dst = ip
			}
		case unix.RTA_GATEWAY:
			r.gw, _ = netip.AddrFromSlice(a.data)
		case unix.RTA_OIF:
			r.dev = int32(u32(a.data))
		}
	}
	if table != unix.RT_TABLE_MAIN {
		return route{}, false
	}
	r.dst = netip.PrefixFrom(dst, int(m.data[1]))
	r.scope = m.data[6]
	return r, true
}

// link is what the preflight needs to know of a link.
type link struct {
	index int32
	name  string
	flags uint32
	mac   []byte
}

// parseLink reads an RTM_NEWLINK message.
func parseLink(m message) (link, error) {
	if m.typ != unix.RTM_NEWLINK {
		return link{}, fmt.Errorf("netlink: got message type %d, want RTM_NEWLINK", m.typ)
	}
	attrs, err := attrsAfter(m.data, unix.SizeofIfInfomsg)
	if err != nil {
		return link{}, err
	}
	l := link{index: int32(native.Uint32(m.data[4:])), flags: native.Uint32(m.data[8:])}
	for _, a := range attrs {
		switch a.typ {
		case unix.IFLA_IFNAME:
			l.name = string(trimNUL(a.data))
		case unix.IFLA_ADDRESS:
			l.mac = a.data
		}
	}
	if l.name == "" {
		return l, errors.New("netlink: link without a name")
	}
	return l, nil
}
