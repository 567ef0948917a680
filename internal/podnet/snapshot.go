package podnet

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Entry is one link, address, route or rule of a network namespace.
type Entry struct {
	// Dev is the link the entry belongs to ("" for a rule, or a route
	// without one).
	Dev  string
	Text string
}

// State is what a network namespace holds that the preflight could leave
// behind: its links, addresses, routes (every table and family) and
// rules, one line each, sorted. Counters, timers, route metrics and
// carrier state are left out: they change on their own, and the preflight
// sets none of them.
type State []Entry

// Snapshot reads the State of the calling thread's network namespace. A
// dump the kernel marks interrupted (the namespace changed while it was
// read) is read again, up to three times in all.
func Snapshot() (State, error) {
	for try := 1; ; try++ {
		s, err := snapshot()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || try == 3 {
			return s, err
		}
	}
}

// Without drops the entries of links whose names start with one of
// prefixes: links that container engines create and delete on their own
// (veth, br-) while a test compares states.
func (s State) Without(prefixes ...string) State {
	return slices.DeleteFunc(slices.Clone(s), func(e Entry) bool {
		return e.Dev != "" && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(e.Dev, p) })
	})
}

// Lines renders the state, one entry a line.
func (s State) Lines() []string {
	out := make([]string, len(s))
	for i, e := range s {
		out[i] = e.Text
	}
	return out
}

func snapshot() (State, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("netlink: list links: %w", err)
	}
	names := map[int]string{}
	var s State
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		s = append(s, Entry{Dev: a.Name, Text: linkText(l)})
	}
	dev := func(index int) string {
		if n, ok := names[index]; ok || index == 0 {
			return n
		}
		return fmt.Sprintf("if%d", index)
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("netlink: list addresses: %w", err)
	}
	for _, a := range addrs {
		d := dev(a.LinkIndex)
		s = append(s, Entry{Dev: d, Text: fmt.Sprintf("addr dev %s %s peer %s broadcast %s scope %d label %q", d, a.IPNet, a.Peer, a.Broadcast, a.Scope, a.Label)})
	}
	// Every table: a filter on table 0 (RT_TABLE_UNSPEC) matches all.
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("netlink: list routes: %w", err)
	}
	for _, r := range routes {
		s = append(s, Entry{Dev: dev(r.LinkIndex), Text: routeText(r, dev)})
	}
	rules, err := netlink.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("netlink: list rules: %w", err)
	}
	for _, r := range rules {
		s = append(s, Entry{Text: ruleText(r)})
	}
	slices.SortFunc(s, func(a, b Entry) int { return strings.Compare(a.Text, b.Text) })
	return s, nil
}

// linkText renders a link: name, index, kind, admin state, MTU, master,
// address.
func linkText(l netlink.Link) string {
	a := l.Attrs()
	up := "down"
	if a.Flags&net.FlagUp != 0 {
		up = "up"
	}
	return fmt.Sprintf("link %s index %d kind %q %s mtu %d master %d address %s", a.Name, a.Index, l.Type(), up, a.MTU, a.MasterIndex, a.HardwareAddr)
}

// routeText renders a route, its next hops included; of its flags, the
// carrier state (dead, linkdown) is left out, and so are its metrics and
// timers.
func routeText(r netlink.Route, dev func(int) string) string {
	const carrier = unix.RTNH_F_DEAD | unix.RTNH_F_LINKDOWN
	var b strings.Builder
	fmt.Fprintf(&b, "route family %d table %d dst %s src %s via %s dev %s proto %d scope %d type %d tos %d metric %d flags %#x",
		r.Family, r.Table, r.Dst, r.Src, r.Gw, dev(r.LinkIndex), r.Protocol, r.Scope, r.Type, r.Tos, r.Priority, r.Flags&^carrier)
	for _, h := range r.MultiPath {
		fmt.Fprintf(&b, " nexthop via %s dev %s weight %d flags %#x", h.Gw, dev(h.LinkIndex), h.Hops+1, h.Flags&^carrier)
	}
	for _, d := range []fmt.Stringer{r.NewDst, r.Via, r.Encap} {
		if d != nil {
			fmt.Fprintf(&b, " %s", d)
		}
	}
	return b.String()
}

// ruleText renders a routing rule in full.
func ruleText(r netlink.Rule) string {
	mask := "none"
	if r.Mask != nil {
		mask = fmt.Sprintf("%#x", *r.Mask)
	}
	return fmt.Sprintf("rule family %d pref %d table %d type %d proto %d from %s to %s iif %q oif %q fwmark %#x/%s tos %d tun %d goto %d flow %d suppress %d/%d invert %t ipproto %d sport %v dport %v uid %v",
		r.Family, r.Priority, r.Table, r.Type, r.Protocol, r.Src, r.Dst, r.IifName, r.OifName, r.Mark, mask, r.Tos, r.TunID, r.Goto, r.Flow,
		r.SuppressPrefixlen, r.SuppressIfgroup, r.Invert, r.IPProto, r.Sport, r.Dport, r.UIDRange)
}
