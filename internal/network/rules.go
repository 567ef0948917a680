package network

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"
)

// dockerEmbeddedDNS is the address of Docker's embedded DNS server. It only
// exists in the node's own network namespace: a pod's packets to it never
// reach Docker, which is why the entrypoint moves the DNS rules to an address
// reachable from nested network namespaces.
const dockerEmbeddedDNS = "127.0.0.11"

// RewriteDockerDNS rewrites iptables-save output of a Docker node so that
// Docker's embedded DNS (127.0.0.11) rules work for pods too. Idempotent:
// RewriteDockerDNS(RewriteDockerDNS(x, ip), ip) == RewriteDockerDNS(x, ip).
// changed reports whether out differs from save.
//
// The edits, each made on whole iptables-save arguments (so quoted comments
// and look-alikes such as 127.0.0.110 or a DOCKER_OUTPUT_X chain are never
// touched):
//   - "-d 127.0.0.11[/N]" becomes "-d HOSTIP[/N]";
//   - "--to-source :53" becomes "--to-source HOSTIP:53";
//   - a tcp/udp DNAT rule to 127.0.0.11 with no destination port gains
//     "--dport 53" before its "-j DNAT";
//   - every "-A OUTPUT X -j DOCKER_OUTPUT" rule is followed by its twin
//     "-A PREROUTING X -j DOCKER_OUTPUT", unless the same table already has
//     that PREROUTING rule.
//
// hostIP must be an IPv4 address (iptables-save, not ip6tables-save, carries
// the rules of the IPv4-only embedded DNS). Any other hostIP leaves save
// unchanged: the caller validates the address it detected before it gets
// here, and a rule set pointed at a bogus address is worse than none.
func RewriteDockerDNS(save []byte, hostIP string) (out []byte, changed bool) {
	host, err := netip.ParseAddr(hostIP)
	if err != nil || !host.Is4() || len(save) == 0 {
		return save, false
	}
	// ParseAddr takes an IPv4 address only in its one spelling (dotted
	// decimal, no leading zeros, no zone): hostIP is host.String(), and
	// is written as it is.

	// Two passes over the rule lines (saveRules), neither keeping state
	// for a line it does not change: a save of blank lines, comments or
	// other rules keeps nothing, and costs a byte's look for a blank line
	// and one IndexByte for any other. A state per line (a split into
	// lines, a slot each) was 2.7 GB for 64 MiB of blank lines. Only the
	// rules an edit or a twin can concern (dnsPatterns) are parsed; the
	// arguments of the rule at hand share one array, emptied for each.
	spans := make([]span, 0, 64)

	// The first finds the PREROUTING rules a twin could duplicate. A
	// PREROUTING twin is only added when its table lacks it, which is
	// what makes a second run a no-op. Tables are told apart by position
	// ("*name" starts one, "COMMIT" ends it), not by name, so a twin is
	// only ever compared with rules that iptables-restore would load
	// alongside it.
	present := make(map[tableRule]bool)
	dns := newLineMatcher(save, dnsPatterns)
	for l := range saveRules(save) {
		line := l.text
		if !dns.in(l.start, l.start+len(line)) ||
			!bytes.Contains(line, []byte("PREROUTING")) || !bytes.Contains(line, []byte("DOCKER_OUTPUT")) {
			continue
		}
		var rw ruleRewrite
		rw, spans = rewriteRule(spans[:0], string(line), hostIP)
		if rw.rule.arg(0) == "-A" && rw.rule.arg(1) == "PREROUTING" {
			present[tableRule{l.table, rw.rule.key()}] = true
		}
	}
	// The second copies the save with its changes, what is between them
	// as it is.
	last := 0
	dns = newLineMatcher(save, dnsPatterns)
	for l := range saveRules(save) {
		line := l.text
		if !dns.in(l.start, l.start+len(line)) {
			continue
		}
		var rw ruleRewrite
		rw, spans = rewriteRule(spans[:0], string(line), hostIP)
		twinKey := tableRule{l.table, rw.twin.key()}
		addTwin := rw.twin.line != "" && !present[twinKey]
		if !rw.edited && !addTwin {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(save)+len(save)/8)
		}
		out = append(out, save[last:l.start]...)
		out = append(out, rw.rule.line...)
		last = l.start + len(line)
		if addTwin {
			present[twinKey] = true
			// A twin of the save's last line, when no newline ends
			// it, gets none either (save[last:] is then empty).
			out = append(out, '\n')
			out = append(out, rw.twin.line...)
		}
	}
	if out == nil {
		return save, false
	}
	return append(out, save[last:]...), true
}

// tableRule is a rule's key in its table (the table's position in the
// save): see RewriteDockerDNS.
type tableRule struct {
	table int
	rule  string
}

// dnsPatterns are what a rule the rewrite edits or twins holds: Docker's
// address ("-d", "--to-destination"), an SNAT "--to-source", or a jump
// to DOCKER_OUTPUT (a twin, or the PREROUTING rule that makes one
// present). Each of those is an argument, and so a part of the line's
// bytes: a line with none of the three is left alone, and never parsed.
var dnsPatterns = []string{dockerEmbeddedDNS, "--to-source", "DOCKER_OUTPUT"}

// ruleRewrite is what RewriteDockerDNS makes of one rule: the rule after
// its edits (edited when they changed it), and its PREROUTING twin (a
// rule of no line when it has none).
type ruleRewrite struct {
	rule   rule
	edited bool
	twin   rule
}

// rewriteRule applies RewriteDockerDNS's edits to the rule line text,
// and finds its twin; the arguments are appended to spans, which it
// returns grown.
func rewriteRule(spans []span, text, host string) (ruleRewrite, []span) {
	var rw ruleRewrite
	rw.rule, spans = appendRule(spans, text)
	// Each rule's own buffer, for its edited line and its twin: those
	// are garbage once the caller has copied them.
	var buf strings.Builder
	if e := rewriteDNSRule(&buf, rw.rule, host); e != text {
		rw.rule, spans = appendRule(spans, e)
		rw.edited = true
	}
	if twin, ok := preroutingTwin(&buf, rw.rule); ok {
		rw.twin, spans = appendRule(spans, twin)
	}
	return rw, spans
}

// rewriteDNSRule applies the per-line edits of RewriteDockerDNS to one rule;
// an edited line is written to buf.
func rewriteDNSRule(buf *strings.Builder, r rule, host string) string {
	// Room for the most edits a rule gets without a duplicate option
	// (-d, --to-source, --dport), off the heap.
	var room [3]edit
	edits := room[:0]
	dnat := -1
	toEmbeddedDNS, tcpOrUDP, hasDport := false, false, false
	for i := range r.args {
		arg, next := r.arg(i), r.arg(i+1)
		switch arg {
		case "-d":
			// Docker writes "-d 127.0.0.11"; iptables-save prints it back
			// with the "/32" of a host match, which must survive.
			if next == dockerEmbeddedDNS || strings.HasPrefix(next, dockerEmbeddedDNS+"/") {
				start := r.args[i+1].start
				edits = append(edits, edit{start, start + len(dockerEmbeddedDNS), host, ""})
			}
		case "--to-source":
			// Docker's SNAT rule rewrites the embedded server's random port
			// back to 53 but keeps the source address, 127.0.0.11. Replies
			// to a pod must come from the address the pod asked instead.
			if next == ":53" {
				edits = append(edits, edit{r.args[i+1].start, r.args[i+1].end, host, ":53"})
			}
		case "--to-destination":
			toEmbeddedDNS = toEmbeddedDNS || next == dockerEmbeddedDNS || strings.HasPrefix(next, dockerEmbeddedDNS+":")
		case "-j":
			if next == "DNAT" && dnat < 0 {
				dnat = i
			}
		case "-p":
			// "! -p tcp" cannot take --dport.
			tcpOrUDP = tcpOrUDP || ((next == "tcp" || next == "udp") && r.arg(i-1) != "!")
		case "--dport", "--destination-port", "--dports", "--destination-ports":
			hasDport = true
		}
	}
	// iptables-nft 1.8.7 drops the port match when it reads back DNAT rules
	// written by iptables-nft 1.8.8 (Docker's host side), leaving a rule that
	// sends every packet for the host IP to the DNS server: kind #3054,
	// minikube #15573.
	if dnat >= 0 && toEmbeddedDNS && tcpOrUDP && !hasDport {
		start := r.args[dnat].start
		edits = append(edits, edit{start, start, "--dport 53 ", ""})
	}
	return applyEdits(buf, r.line, edits)
}

// preroutingTwin returns "-A PREROUTING X -j DOCKER_OUTPUT" for a rule
// "-A OUTPUT X -j DOCKER_OUTPUT". Docker only sends the node's own (OUTPUT)
// DNS traffic to DOCKER_OUTPUT; pods' packets arrive through PREROUTING.
// The twin is written to buf.
func preroutingTwin(buf *strings.Builder, r rule) (string, bool) {
	n := len(r.args)
	if n < 4 || r.arg(0) != "-A" || r.arg(1) != "OUTPUT" || r.arg(n-2) != "-j" || r.arg(n-1) != "DOCKER_OUTPUT" {
		return "", false
	}
	return applyEdits(buf, r.line, []edit{{r.args[1].start, r.args[1].end, "PREROUTING", ""}}), true
}

// rule is one iptables-save rule line split into its arguments, each kept as
// a byte range of the line so edits leave every other byte alone.
type rule struct {
	line string
	args []span
}

type span struct{ start, end int }

// appendRule splits a rule line the way iptables-restore does: on blanks,
// except inside double quotes, where a backslash escapes the next byte
// (iptables-save quotes a --comment that contains blanks). An unterminated
// quote runs to the end of the line. The arguments are appended to spans,
// which it returns grown: the rules of one text share one array.
func appendRule(spans []span, line string) (rule, []span) {
	first := len(spans)
	i := 0
	for {
		for i < len(line) && isBlank(line[i]) {
			i++
		}
		if i == len(line) {
			// The full slice expression keeps a later rule's appends
			// out of this rule's arguments.
			return rule{line: line, args: spans[first:len(spans):len(spans)]}, spans
		}
		start := i
		quoted := false
		for i < len(line) && (quoted || !isBlank(line[i])) {
			switch {
			case quoted && line[i] == '\\' && i+1 < len(line):
				i++
			case line[i] == '"':
				quoted = !quoted
			}
			i++
		}
		spans = append(spans, span{start, i})
	}
}

// isBlank is what separates fields in the texts this package rewrites
// (iptables-save rules, resolv.conf): spaces, tabs and '\r', so that a CRLF
// file is rewritten the same as an LF one; the '\r' itself is kept.
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// arg returns argument i, or "" when there is none.
func (r rule) arg(i int) string {
	if i < 0 || i >= len(r.args) {
		return ""
	}
	return r.line[r.args[i].start:r.args[i].end]
}

// key identifies a rule independently of the blanks between its arguments.
func (r rule) key() string {
	// Arguments one space apart, as iptables-save prints them, are their
	// own key.
	single := len(r.args) > 0
	for i := 1; single && i < len(r.args); i++ {
		single = r.args[i].start == r.args[i-1].end+1 && r.line[r.args[i-1].end] == ' '
	}
	if single {
		return r.line[r.args[0].start:r.args[len(r.args)-1].end]
	}
	parts := make([]string, len(r.args))
	for i := range r.args {
		parts[i] = r.arg(i)
	}
	return strings.Join(parts, " ")
}

// edit replaces line[start:end] with text and then more (a text in two
// parts, so that it need not be concatenated first).
type edit struct {
	start, end int
	text, more string
}

// applyEdits applies non-overlapping edits, in any order. The edited line
// is written to buf, and is a slice of buf's string: a strings.Builder
// never changes what it has written, so it stays valid as buf grows.
func applyEdits(buf *strings.Builder, line string, edits []edit) string {
	if len(edits) == 0 {
		return line
	}
	slices.SortStableFunc(edits, func(a, b edit) int { return a.start - b.start })
	start := buf.Len()
	last := 0
	for _, e := range edits {
		buf.WriteString(line[last:e.start])
		buf.WriteString(e.text)
		buf.WriteString(e.more)
		last = e.end
	}
	buf.WriteString(line[last:])
	return buf.String()[start:]
}
