package network

import (
	"bytes"
	"fmt"
	"net/netip"
	"unicode"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// rewriteResolvConf rewrites resolv.conf: nameserver 127.0.0.11 -> host.
// search == nil: KIND_DNS_SEARCH unset (keep search lines);
// *search == "": drop every search line; otherwise one "search <value>" line first and every other search line dropped.
// Returns an error for a search value containing a newline / control character.
//
// Every other byte is kept: comments (Docker's generated file carries several),
// options, ordering, blank lines and a nameserver whose address merely starts
// with 127.0.0.11 (127.0.0.110). Trailing newlines are collapsed to one, as
// the reference's `echo "$(...)"` does. host must not be 127.0.0.11 itself;
// an invalid host only rewrites the search lines: every nameserver line is
// kept, so none is ever written without an address.
//
// A line's keyword is its first field, with fields split on spaces, tabs and
// '\r'. glibc only honours keywords at the very start of a line, but Go's
// resolver, and with it the kubelet and CoreDNS that read this file for pods,
// also accepts leading blanks. A line either reader takes as a search line
// is dropped, and one either takes as a nameserver line is rewritten.
func rewriteResolvConf(orig []byte, host netip.Addr, search *string) ([]byte, error) {
	if host == netip.MustParseAddr(dockerEmbeddedDNS) {
		return nil, fmt.Errorf("host IP %s is Docker's embedded DNS itself", host)
	}
	if search != nil {
		if err := checkSearch(*search); err != nil {
			return nil, err
		}
	}

	// Room for the input, a short search line and a longer address or
	// two.
	out := make([]byte, 0, len(orig)+64)
	if search != nil && *search != "" {
		out = append(out, "search "...)
		out = append(out, *search...)
		out = append(out, '\n')
	}
	hostText := host.String()
	// An empty text is one empty line, which the final trim drops again.
	for line := range bytes.SplitSeq(bytes.TrimRight(orig, "\n"), []byte("\n")) {
		f, n := resolvFields(line)
		switch {
		case n > 0 && string(line[f[0].start:f[0].end]) == "search" && search != nil:
			continue
		case host.IsValid() && namesEmbeddedDNSLine(line, f, n):
			out = append(out, line[:f[1].start]...)
			out = append(out, hostText...)
			out = append(out, line[f[1].end:]...)
		default:
			out = append(out, line...)
		}
		out = append(out, '\n')
	}
	// Dropped search lines can expose blank lines that were not last before.
	return append(bytes.TrimRight(out, "\n"), '\n'), nil
}

// checkSearch refuses a search value that would not stay one "search" line:
// a newline would inject further resolv.conf directives, and other control
// characters (tab included: domains are separated by spaces; C1 too, as
// UTF-8) are never part of a domain name.
func checkSearch(search string) error {
	for i := 0; i < len(search); i++ {
		if c := search[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("DNS search value %s: control character %q at byte %d", logline.QuoteClipped(search), c, i)
		}
	}
	for i, r := range search {
		if unicode.IsControl(r) {
			return fmt.Errorf("DNS search value %s: control character %U at byte %d", logline.QuoteClipped(search), r, i)
		}
	}
	return nil
}

// namesEmbeddedDNSLine reports whether a resolv.conf line, whose first
// fields are f (n of them, from resolvFields), is a nameserver line for
// Docker's embedded DNS.
func namesEmbeddedDNSLine(line []byte, f [2]span, n int) bool {
	return n > 1 && string(line[f[0].start:f[0].end]) == "nameserver" &&
		string(line[f[1].start:f[1].end]) == dockerEmbeddedDNS
}

// resolvFields returns the byte ranges of a resolv.conf line's first two
// fields (its keyword and first value: all a rewrite looks at), and how
// many of those the line has.
func resolvFields(line []byte) (f [2]span, n int) {
	i := 0
	for n < len(f) {
		for i < len(line) && isBlank(line[i]) {
			i++
		}
		if i == len(line) {
			break
		}
		start := i
		for i < len(line) && !isBlank(line[i]) {
			i++
		}
		f[n] = span{start, i}
		n++
	}
	return f, n
}
