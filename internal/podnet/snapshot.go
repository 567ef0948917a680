package podnet

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Entry is one link, address, route or rule of a network namespace.
type Entry struct {
	// Dev is the link the entry belongs to ("" for a rule, or a route
	// without one).
	Dev  string
	Text string
}

func (e Entry) String() string { return e.Text }

// State is what a network namespace holds that the preflight could leave
// behind: its links, addresses, routes (every table, both families) and
// rules, one line each, sorted. Counters, timers and carrier state are
// left out: they change on their own.
type State []Entry

// Snapshot reads the State of the calling thread's network namespace.
func Snapshot() (State, error) {
	c, err := dialHere()
	if err != nil {
		return nil, err
	}
	defer c.close()
	return snapshot(c)
}

// SnapshotNS reads the State of the network namespace open as ns.
func SnapshotNS(ns int) (State, error) {
	c, err := dial(ns)
	if err != nil {
		return nil, err
	}
	defer c.close()
	return snapshot(c)
}

// Without drops the entries of links whose names start with one of
// prefixes: links that container engines create and delete on their own
// (veth, br-) while a test compares states.
func (s State) Without(prefixes ...string) State {
	var out State
	for _, e := range s {
		if e.Dev != "" && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(e.Dev, p) }) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// Lines renders the state, one entry a line.
func (s State) Lines() []string {
	out := make([]string, len(s))
	for i, e := range s {
		out[i] = e.Text
	}
	return out
}

func snapshot(c *conn) (State, error) {
	links, err := c.do(dumpRequest(unix.RTM_GETLINK, ifinfomsg(unix.AF_UNSPEC, 0, 0, 0), "dump links"))
	if err != nil {
		return nil, err
	}
	names := map[int32]string{}
	var s State
	for _, m := range links {
		e, index, err := linkEntry(m)
		if err != nil {
			return nil, err
		}
		names[index] = e.Dev
		s = append(s, e)
	}
	dev := func(index int32) string {
		if n, ok := names[index]; ok {
			return n
		}
		return fmt.Sprintf("if%d", index)
	}
	s, err = dumpEntries(c, s, dumpRequest(unix.RTM_GETADDR, ifaddrmsg(unix.AF_UNSPEC, 0, 0, 0, 0), "dump addresses"),
		func(m message) (Entry, error) { return addrEntry(m, dev) })
	if err != nil {
		return nil, err
	}
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		s, err = dumpEntries(c, s, dumpRequest(unix.RTM_GETROUTE, rtmsg(fam, 0, 0, 0, 0, 0), "dump routes"),
			func(m message) (Entry, error) { return routeEntry(m, dev) })
		if err != nil {
			return nil, err
		}
		s, err = dumpEntries(c, s, dumpRequest(unix.RTM_GETRULE, rtmsg(fam, 0, 0, 0, 0, 0), "dump rules"), ruleEntry)
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(s, func(a, b Entry) int { return strings.Compare(a.Text, b.Text) })
	return s, nil
}

// dumpEntries sends a dump request and appends each message of the answer,
// made an entry by entry, to s.
func dumpEntries(c *conn, s State, r request, entry func(message) (Entry, error)) (State, error) {
	msgs, err := c.do(r)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		e, err := entry(m)
		if err != nil {
			return nil, err
		}
		s = append(s, e)
	}
	return s, nil
}

// linkEntry renders an RTM_NEWLINK message: name, index, kind, admin
// state, MTU, master, address.
func linkEntry(m message) (Entry, int32, error) {
	attrs, err := attrsAfter(m.data, unix.SizeofIfInfomsg)
	if err != nil {
		return Entry{}, 0, err
	}
	index := int32(native.Uint32(m.data[4:]))
	flags := native.Uint32(m.data[8:])
	var name, kind string
	var b strings.Builder
	for _, a := range attrs {
		switch a.typ {
		case unix.IFLA_IFNAME:
			name = string(trimNUL(a.data))
		case unix.IFLA_LINKINFO:
			info, err := parseAttrs(a.data)
			if err != nil {
				return Entry{}, 0, err
			}
			for _, i := range info {
				if i.typ == unix.IFLA_INFO_KIND {
					kind = string(trimNUL(i.data))
				}
			}
		case unix.IFLA_MTU:
			fmt.Fprintf(&b, " mtu %d", u32(a.data))
		case unix.IFLA_MASTER:
			fmt.Fprintf(&b, " master %d", u32(a.data))
		case unix.IFLA_ADDRESS:
			fmt.Fprintf(&b, " address %s", hex.EncodeToString(a.data))
		}
	}
	up := "down"
	if flags&unix.IFF_UP != 0 {
		up = "up"
	}
	text := fmt.Sprintf("link %s index %d kind %q %s%s", name, index, kind, up, b.String())
	return Entry{Dev: name, Text: text}, index, nil
}

// addrEntry renders an RTM_NEWADDR message; its flags (tentative, ...)
// and cache times are left out.
func addrEntry(m message, dev func(int32) string) (Entry, error) {
	attrs, err := attrsAfter(m.data, unix.SizeofIfAddrmsg)
	if err != nil {
		return Entry{}, err
	}
	d := dev(int32(native.Uint32(m.data[4:])))
	text := fmt.Sprintf("addr dev %s family %d /%d scope %d%s", d, m.data[0], m.data[1], m.data[3],
		renderAttrs(attrs, map[uint16]string{unix.IFA_ADDRESS: "address", unix.IFA_LOCAL: "local", unix.IFA_BROADCAST: "broadcast", unix.IFA_LABEL: "label"},
			[]uint16{unix.IFA_ADDRESS, unix.IFA_LOCAL, unix.IFA_BROADCAST}, []uint16{unix.IFA_CACHEINFO, unix.IFA_FLAGS}))
	return Entry{Dev: d, Text: text}, nil
}

// routeEntry renders an RTM_NEWROUTE message, every attribute but the
// cache info and expiry timers; of its flags, the next hop's carrier state
// (dead, linkdown) is left out.
func routeEntry(m message, dev func(int32) string) (Entry, error) {
	attrs, err := attrsAfter(m.data, unix.SizeofRtMsg)
	if err != nil {
		return Entry{}, err
	}
	d := ""
	for _, a := range attrs {
		if a.typ == unix.RTA_OIF && len(a.data) >= 4 {
			d = dev(int32(u32(a.data)))
		}
	}
	h := m.data
	text := fmt.Sprintf("route family %d dst /%d src /%d tos %d table %d proto %d scope %d type %d flags %#x dev %s%s",
		h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], native.Uint32(h[8:])&^(unix.RTNH_F_DEAD|unix.RTNH_F_LINKDOWN), d,
		renderAttrs(attrs, map[uint16]string{unix.RTA_DST: "to", unix.RTA_SRC: "from", unix.RTA_GATEWAY: "via", unix.RTA_PREFSRC: "prefsrc", unix.RTA_TABLE: "table-id", unix.RTA_PRIORITY: "metric"},
			[]uint16{unix.RTA_DST, unix.RTA_SRC, unix.RTA_GATEWAY, unix.RTA_PREFSRC}, []uint16{unix.RTA_OIF, unix.RTA_CACHEINFO, unix.RTA_EXPIRES}))
	return Entry{Dev: d, Text: text}, nil
}

// ruleEntry renders an RTM_NEWRULE message in full.
func ruleEntry(m message) (Entry, error) {
	attrs, err := attrsAfter(m.data, unix.SizeofRtMsg)
	if err != nil {
		return Entry{}, err
	}
	h := m.data
	text := fmt.Sprintf("rule family %d dst /%d src /%d tos %d table %d action %d flags %#x%s",
		h[0], h[1], h[2], h[3], h[4], h[7], native.Uint32(h[8:]),
		renderAttrs(attrs, map[uint16]string{unix.FRA_PRIORITY: "pref", unix.FRA_TABLE: "table-id", unix.FRA_IIFNAME: "iif", unix.FRA_OIFNAME: "oif", unix.FRA_SRC: "from", unix.FRA_DST: "to", unix.FRA_FWMARK: "fwmark"},
			[]uint16{unix.FRA_SRC, unix.FRA_DST}, nil))
	return Entry{Text: text}, nil
}

// renderAttrs renders attributes in their order: named ones by name (IP
// addresses as such, NUL-terminated strings as text, 4 bytes as a number),
// others as type=hex; skip are left out.
func renderAttrs(attrs []rawAttr, names map[uint16]string, addrs, skip []uint16) string {
	var b strings.Builder
	for _, a := range attrs {
		if slices.Contains(skip, a.typ) {
			continue
		}
		name, ok := names[a.typ]
		if !ok {
			fmt.Fprintf(&b, " %d=%s", a.typ, hex.EncodeToString(a.data))
			continue
		}
		switch {
		case slices.Contains(addrs, a.typ):
			if ip, ok := netip.AddrFromSlice(a.data); ok {
				fmt.Fprintf(&b, " %s %s", name, ip)
			} else {
				fmt.Fprintf(&b, " %s %x", name, a.data)
			}
		case len(a.data) > 0 && a.data[len(a.data)-1] == 0 && len(a.data) != 4:
			fmt.Fprintf(&b, " %s %s", name, trimNUL(a.data))
		case len(a.data) == 4:
			fmt.Fprintf(&b, " %s %d", name, u32(a.data))
		default:
			fmt.Fprintf(&b, " %s %x", name, a.data)
		}
	}
	return b.String()
}

func u32(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	return native.Uint32(b)
}
