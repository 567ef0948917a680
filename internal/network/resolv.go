package network

import (
	"fmt"
	"net/netip"
	"strings"
)

// RewriteResolvConf rewrites resolv.conf: nameserver 127.0.0.11 -> hostIP.
// search == nil: KIND_DNS_SEARCH unset (keep search lines);
// *search == "": drop every search line; otherwise one "search <value>" line first and every other search line dropped.
// Returns an error for a search value containing a newline / control character.
//
// Every other byte is kept: comments (Docker's generated file carries several),
// options, ordering, blank lines and a nameserver whose address merely starts
// with 127.0.0.11 (127.0.0.110). Trailing newlines are collapsed to one, as
// the reference's `echo "$(...)"` does. hostIP must be a valid IP address
// other than 127.0.0.11 itself, so a bad detection never produces a
// "nameserver" line without an address.
//
// A line's keyword is its first field, with fields split on spaces, tabs and
// '\r'. glibc only honours keywords at the very start of a line, but Go's
// resolver, and with it the kubelet and CoreDNS that read this file for pods,
// also accepts leading blanks. A line either reader takes as a search line
// is dropped, and one either takes as a nameserver line is rewritten.
func RewriteResolvConf(orig []byte, hostIP string, search *string) ([]byte, error) {
	host, err := netip.ParseAddr(hostIP)
	if err != nil {
		return nil, fmt.Errorf("host IP: %w", err)
	}
	if host == netip.MustParseAddr(dockerEmbeddedDNS) {
		return nil, fmt.Errorf("host IP %s is Docker's embedded DNS itself", hostIP)
	}
	if search != nil {
		if err := checkSearch(*search); err != nil {
			return nil, err
		}
	}

	var b strings.Builder
	b.Grow(len(orig) + 64)
	if search != nil && *search != "" {
		b.WriteString("search ")
		b.WriteString(*search)
		b.WriteByte('\n')
	}
	if text := strings.TrimRight(string(orig), "\n"); text != "" {
		for line := range strings.SplitSeq(text, "\n") {
			fields := resolvFields(line)
			switch {
			case len(fields) > 0 && line[fields[0].start:fields[0].end] == "search" && search != nil:
				continue
			case len(fields) > 1 && line[fields[0].start:fields[0].end] == "nameserver" &&
				line[fields[1].start:fields[1].end] == dockerEmbeddedDNS:
				line = line[:fields[1].start] + host.String() + line[fields[1].end:]
			}
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	// Dropped search lines can expose blank lines that were not last before.
	return []byte(strings.TrimRight(b.String(), "\n") + "\n"), nil
}

// checkSearch refuses a search value that would not stay one "search" line:
// a newline would inject further resolv.conf directives, and other control
// characters (tab included: domains are separated by spaces) are never part
// of a domain name.
func checkSearch(search string) error {
	for i := 0; i < len(search); i++ {
		if c := search[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("DNS search value %q: control character %q at byte %d", search, c, i)
		}
	}
	return nil
}

// resolvFields returns the byte ranges of a resolv.conf line's fields.
func resolvFields(line string) []span {
	var fields []span
	i := 0
	for {
		for i < len(line) && isResolvBlank(line[i]) {
			i++
		}
		if i == len(line) {
			return fields
		}
		start := i
		for i < len(line) && !isResolvBlank(line[i]) {
			i++
		}
		fields = append(fields, span{start, i})
	}
}

func isResolvBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }
