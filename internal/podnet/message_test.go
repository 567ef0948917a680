package podnet

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// The expected messages are spelled out field by field, in the layout of
// <linux/netlink.h>, <linux/rtnetlink.h> and <linux/if_link.h>; multi-byte
// fields are in the host's order, as netlink wants them.

func u16b(v uint16) []byte { return native.AppendUint16(nil, v) }
func u32b(v uint32) []byte { return native.AppendUint32(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// nlhdr is struct nlmsghdr.
func nlhdr(length uint32, typ, flags uint16, seq uint32) []byte {
	return cat(u32b(length), u16b(typ), u16b(flags), u32b(seq), u32b(0))
}

// rta is struct rtattr: length, type (the payload and padding follow).
func rta(length, typ uint16) []byte { return cat(u16b(length), u16b(typ)) }

var zeroIfinfo = make([]byte, 16) // struct ifinfomsg, all zero

func TestEncode(t *testing.T) {
	mac := []byte{0x02, 0x42, 0xac, 0x11, 0x00, 0x02}
	tests := []struct {
		name string
		req  request
		want []byte
	}{
		{
			name: "veth pair",
			req:  newVeth("kpfh01234567", "kpfp01234567"),
			want: cat(
				nlhdr(108, unix.RTM_NEWLINK, 0x605, 7), // REQUEST|ACK|EXCL|CREATE
				zeroIfinfo,
				rta(17, unix.IFLA_IFNAME), []byte("kpfh01234567\x00"), []byte{0, 0, 0},
				rta(56, unix.IFLA_LINKINFO),
				rta(8, unix.IFLA_INFO_KIND), []byte("veth"),
				rta(44, unix.IFLA_INFO_DATA),
				rta(40, vethInfoPeer), zeroIfinfo,
				rta(17, unix.IFLA_IFNAME), []byte("kpfp01234567\x00"), []byte{0, 0, 0},
			),
		},
		{
			name: "link up",
			req:  setLinkUp(5),
			want: cat(
				nlhdr(32, unix.RTM_NEWLINK, 0x5, 7), // REQUEST|ACK
				[]byte{unix.AF_UNSPEC, 0}, u16b(0), u32b(5), u32b(unix.IFF_UP), u32b(unix.IFF_UP),
			),
		},
		{
			name: "move into a namespace",
			req:  moveLink(9, 42),
			want: cat(
				nlhdr(40, unix.RTM_NEWLINK, 0x5, 7),
				[]byte{0, 0}, u16b(0), u32b(9), u32b(0), u32b(0),
				rta(8, unix.IFLA_NET_NS_FD), u32b(42),
			),
		},
		{
			name: "delete by name",
			req:  delLink("kpfh01234567"),
			want: cat(
				nlhdr(52, unix.RTM_DELLINK, 0x5, 7),
				zeroIfinfo,
				rta(17, unix.IFLA_IFNAME), []byte("kpfh01234567\x00"), []byte{0, 0, 0},
			),
		},
		{
			name: "a /32 address",
			req:  newAddr(3, netip.MustParsePrefix("198.51.100.7/32")),
			want: cat(
				nlhdr(40, unix.RTM_NEWADDR, 0x605, 7),
				[]byte{unix.AF_INET, 32, 0, unix.RT_SCOPE_UNIVERSE}, u32b(3),
				rta(8, unix.IFA_LOCAL), []byte{198, 51, 100, 7},
				rta(8, unix.IFA_ADDRESS), []byte{198, 51, 100, 7},
			),
		},
		{
			name: "link-scoped route to the gateway",
			req:  newRoute(route{dst: netip.MustParsePrefix("169.254.1.1/32"), dev: 3, scope: unix.RT_SCOPE_LINK}),
			want: cat(
				nlhdr(44, unix.RTM_NEWROUTE, 0x605, 7),
				// family, dst_len, src_len, tos, table, protocol, scope, type, flags
				[]byte{unix.AF_INET, 32, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_STATIC, unix.RT_SCOPE_LINK, unix.RTN_UNICAST}, u32b(0),
				rta(8, unix.RTA_DST), []byte{169, 254, 1, 1},
				rta(8, unix.RTA_OIF), u32b(3),
			),
		},
		{
			name: "default route via the gateway",
			req:  newRoute(route{dst: netip.MustParsePrefix("0.0.0.0/0"), gw: Gateway, dev: 3}),
			want: cat(
				nlhdr(44, unix.RTM_NEWROUTE, 0x605, 7),
				[]byte{unix.AF_INET, 0, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_STATIC, unix.RT_SCOPE_UNIVERSE, unix.RTN_UNICAST}, u32b(0),
				rta(8, unix.RTA_OIF), u32b(3),
				rta(8, unix.RTA_GATEWAY), []byte{169, 254, 1, 1},
			),
		},
		{
			name: "delete the host route",
			req:  delRoute(route{dst: netip.MustParsePrefix("198.51.100.7/32"), dev: 12, scope: unix.RT_SCOPE_LINK}),
			want: cat(
				nlhdr(44, unix.RTM_DELROUTE, 0x5, 7),
				[]byte{unix.AF_INET, 32, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_STATIC, unix.RT_SCOPE_LINK, unix.RTN_UNICAST}, u32b(0),
				rta(8, unix.RTA_DST), []byte{198, 51, 100, 7},
				rta(8, unix.RTA_OIF), u32b(12),
			),
		},
		{
			name: "permanent neighbour",
			req:  newNeigh(3, Gateway, mac),
			want: cat(
				nlhdr(48, unix.RTM_NEWNEIGH, 0x605, 7),
				// family, pad, pad, ifindex, state, flags, type
				[]byte{unix.AF_INET, 0}, u16b(0), u32b(3), u16b(unix.NUD_PERMANENT), []byte{0, 0},
				rta(8, unix.NDA_DST), []byte{169, 254, 1, 1},
				rta(10, unix.NDA_LLADDR), mac, []byte{0, 0},
			),
		},
		{
			name: "dump routes",
			req:  dumpRequest(unix.RTM_GETROUTE, rtmsg(unix.AF_INET6, 0, 0, 0, 0, 0), "dump routes"),
			want: cat(
				nlhdr(28, unix.RTM_GETROUTE, 0x301, 7), // REQUEST|ROOT|MATCH
				[]byte{unix.AF_INET6, 0, 0, 0, 0, 0, 0, 0}, u32b(0),
			),
		},
	}
	for _, tt := range tests {
		got := tt.req.encode(7)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: encoding (-want +got):\n%s", tt.name, diff)
		}
		if len(got)%4 != 0 {
			t.Errorf("%s: %d bytes, not a multiple of 4", tt.name, len(got))
		}
		// What we send parses back as one message.
		msgs, err := parseMessages(got)
		if err != nil || len(msgs) != 1 || msgs[0].typ != tt.req.typ || msgs[0].seq != 7 {
			t.Errorf("%s: parse back: %+v, %v", tt.name, msgs, err)
		}
	}
}

func TestParseMessages(t *testing.T) {
	// Two messages in one datagram, the first with padding.
	first := cat(nlhdr(21, unix.RTM_NEWLINK, 2, 9), []byte{1, 2, 3, 4, 5}, []byte{0, 0, 0})
	second := nlhdr(16, unix.NLMSG_DONE, 2, 9)
	msgs, err := parseMessages(cat(first, second))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || !bytes.Equal(msgs[0].data, []byte{1, 2, 3, 4, 5}) || msgs[1].typ != unix.NLMSG_DONE {
		t.Errorf("got %+v", msgs)
	}
	for name, b := range map[string][]byte{
		"short header":     make([]byte, 10),
		"length too small": nlhdr(8, 1, 0, 0),
		"length too large": nlhdr(64, 1, 0, 0),
	} {
		if _, err := parseMessages(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseAttrs(t *testing.T) {
	b := cat(rta(8, unix.IFLA_MTU), u32b(1500), rta(6, unix.IFLA_IFNAME|unix.NLA_F_NESTED), []byte("a\x00"), []byte{0, 0})
	attrs, err := parseAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []rawAttr{{unix.IFLA_MTU, u32b(1500)}, {unix.IFLA_IFNAME, []byte("a\x00")}}
	if diff := cmp.Diff(want, attrs, cmp.AllowUnexported(rawAttr{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for name, b := range map[string][]byte{
		"short":      {1, 0},
		"zero len":   rta(0, 1),
		"len beyond": rta(12, 1),
	} {
		if _, err := parseAttrs(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseAck(t *testing.T) {
	orig := nlhdr(108, unix.RTM_NEWLINK, 0x605, 3)
	tests := []struct {
		name string
		msg  message
		want error
	}{
		{"ack", message{typ: unix.NLMSG_ERROR, data: cat(u32b(0), orig)}, nil},
		{"plain error", message{typ: unix.NLMSG_ERROR, data: cat(u32b(uint32(0xffffffef)), orig)}, // -17
			&Error{What: "create", Errno: syscall.EEXIST}},
		{"extended ack, capped", message{
			typ: unix.NLMSG_ERROR, flags: unix.NLM_F_ACK_TLVS | unix.NLM_F_CAPPED,
			data: cat(u32b(uint32(0xffffffea)), orig, rta(4+19, unix.NLMSGERR_ATTR_MSG), []byte("Unknown device type"), []byte{0}),
		}, &Error{What: "create", Errno: syscall.EINVAL, Msg: "Unknown device type"}},
		{"extended ack after the full request", message{
			typ: unix.NLMSG_ERROR, flags: unix.NLM_F_ACK_TLVS,
			data: cat(u32b(uint32(0xffffffea)), nlhdr(20, unix.RTM_NEWLINK, 0x605, 3), []byte{9, 9, 9, 9},
				rta(4+4, unix.NLMSGERR_ATTR_MSG), []byte("bad\x00")),
		}, &Error{What: "create", Errno: syscall.EINVAL, Msg: "bad"}},
	}
	for _, tt := range tests {
		err := parseAck(tt.msg, "create")
		if diff := cmp.Diff(tt.want, err, cmp.Comparer(func(a, b error) bool {
			return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error())
		})); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tt.name, diff)
		}
	}
	err := parseAck(message{typ: unix.NLMSG_ERROR, data: cat(u32b(uint32(0xffffffed)), orig)}, "delete link x") // -19
	if !errors.Is(err, unix.ENODEV) {
		t.Errorf("errors.Is(%v, ENODEV) = false", err)
	}
	if err := parseAck(message{typ: unix.NLMSG_ERROR, data: []byte{1}}, "x"); err == nil || !strings.Contains(err.Error(), "short") {
		t.Errorf("short error message: %v", err)
	}
}

func TestParseLink(t *testing.T) {
	data := cat(
		[]byte{0, 0}, u16b(1), u32b(12), u32b(unix.IFF_UP|unix.IFF_BROADCAST), u32b(0),
		rta(17, unix.IFLA_IFNAME), []byte("kpfh01234567\x00"), []byte{0, 0, 0},
		rta(10, unix.IFLA_ADDRESS), []byte{2, 0, 0, 0, 0, 1}, []byte{0, 0},
	)
	l, err := parseLink(message{typ: unix.RTM_NEWLINK, data: data})
	if err != nil {
		t.Fatal(err)
	}
	want := link{index: 12, name: "kpfh01234567", flags: unix.IFF_UP | unix.IFF_BROADCAST, mac: []byte{2, 0, 0, 0, 0, 1}}
	if diff := cmp.Diff(want, l, cmp.AllowUnexported(link{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := parseLink(message{typ: unix.RTM_NEWADDR, data: data}); err == nil {
		t.Error("RTM_NEWADDR parsed as a link")
	}
	if _, err := parseLink(message{typ: unix.RTM_NEWLINK, data: data[:8]}); err == nil {
		t.Error("a truncated header parsed")
	}
}

func TestParseRoute(t *testing.T) {
	r := route{dst: netip.MustParsePrefix("198.51.100.7/32"), dev: 12, scope: unix.RT_SCOPE_LINK}
	// The kernel reports a route in the form it is added in: the same
	// header and attributes (and more).
	msgs, err := parseMessages(newRoute(r).encode(1))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := parseRoute(msgs[0])
	if !ok || got != r {
		t.Errorf("parseRoute = %v, %t; want %v", got, ok, r)
	}
	gw := route{dst: netip.MustParsePrefix("0.0.0.0/0"), gw: Gateway, dev: 3}
	msgs, _ = parseMessages(newRoute(gw).encode(1))
	if got, ok := parseRoute(msgs[0]); !ok || got != gw {
		t.Errorf("parseRoute = %v, %t; want %v", got, ok, gw)
	}
	local := message{typ: unix.RTM_NEWROUTE, data: rtmsg(unix.AF_INET, 32, unix.RT_TABLE_LOCAL, 2, unix.RT_SCOPE_HOST, unix.RTN_LOCAL)}
	if _, ok := parseRoute(local); ok {
		t.Error("a local-table route parsed as a main-table one")
	}
}

func TestRandomAddr(t *testing.T) {
	for _, p := range []netip.Prefix{podPrefix, netip.MustParsePrefix("10.0.0.0/30")} {
		for range 500 {
			a, err := randomAddr(p)
			if err != nil {
				t.Fatal(err)
			}
			last := a.As4()[3] & byte(^uint32(0)>>p.Bits())
			if !p.Contains(a) || a == p.Masked().Addr() || last == byte(^uint32(0)>>p.Bits()) {
				t.Fatalf("randomAddr(%s) = %s", p, a)
			}
		}
	}
}

func TestCapable(t *testing.T) {
	status := func(eff string) []byte {
		return []byte("Name:\tentrypoint\nCapInh:\t0000000000000000\nCapEff:\t" + eff + "\nCapBnd:\t000001ffffffffff\n")
	}
	tests := []struct {
		euid   int
		status []byte
		want   bool
	}{
		{0, status("000001fffeffffff"), true},     // all but CAP_SYS_RESOURCE, as on our CI
		{0, status("0000000000001000"), false},    // CAP_NET_ADMIN only
		{0, status("0000000000201000"), true},     // CAP_NET_ADMIN + CAP_SYS_ADMIN
		{0, status("00000000a80425fb"), false},    // Docker's default set
		{1000, status("000001ffffffffff"), false}, // not root
		{0, []byte("Name:\tx\n"), false},          // no CapEff line
		{0, status("zz"), false},
	}
	for _, tt := range tests {
		if got := Capable(tt.euid, tt.status); got != tt.want {
			t.Errorf("Capable(%d, %q) = %t, want %t", tt.euid, tt.status, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(newVeth("a", "b").encode(1))
	f.Add(cat(nlhdr(21, unix.RTM_NEWLINK, 2, 9), []byte{1, 2, 3, 4, 5}, []byte{0, 0, 0}, nlhdr(16, unix.NLMSG_DONE, 2, 9)))
	f.Add(cat(nlhdr(36, unix.NLMSG_ERROR, unix.NLM_F_ACK_TLVS, 1), u32b(uint32(0xffffffea)), nlhdr(16, 0, 0, 0)))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := parseMessages(b)
		if err != nil {
			return
		}
		for _, m := range msgs {
			_ = parseAck(m, "fuzz")
			_, _ = parseLink(m)
			_, _, _ = linkEntry(m)
			_, _ = addrEntry(m, func(int32) string { return "x" })
			_, _ = routeEntry(m, func(int32) string { return "x" })
			_, _ = ruleEntry(m)
		}
	})
}
