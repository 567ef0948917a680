// Package network holds the text transformations behind the entrypoint's
// select_iptables and enable_network_magic steps: iptables-save output,
// resolv.conf, the node's Kubernetes config files and /proc/net/route.
// Everything in these files is a pure function of its arguments; reading and
// writing the system happens in the step that calls them.
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

// CountRules counts the rule lines (lines starting with "-") of iptables-save
// output. It is the same measure as the reference's `grep -c '^-'`, taken from
// kubernetes-sigs/iptables-wrappers: the backend holding more rules is the one
// the host (and so the node) is really using.
func CountRules(save []byte) int {
	n := 0
	for line := range bytes.Lines(save) {
		if line[0] == '-' {
			n++
		}
	}
	return n
}

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
	hostText := host.String()

	text := string(save)
	endsInNewline := strings.HasSuffix(text, "\n")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")

	// A PREROUTING twin is only added when its table lacks it, which is what
	// makes a second run a no-op. Tables are told apart by position ("*name"
	// starts one, "COMMIT" ends it), not by name, so a twin is only ever
	// compared with rules that iptables-restore would load alongside it.
	type tableRule struct {
		table int
		rule  string
	}
	// Only lines starting with '-' are rules, as for CountRules.
	present := make(map[tableRule]bool)
	tableOf := make([]int, len(lines))
	isRule := make([]bool, len(lines))
	rules := make([]rule, len(lines)) // each rule parsed once, after its edits
	table := 0
	for i, line := range lines {
		if strings.HasPrefix(line, "*") {
			table++
		}
		tableOf[i] = table
		if isRule[i] = strings.HasPrefix(line, "-"); isRule[i] {
			r := parseRule(line)
			if edited := rewriteDNSRule(r, hostText); edited != line {
				line, r = edited, parseRule(edited)
				lines[i] = line
			}
			rules[i] = r
			if r.chain() == "PREROUTING" {
				present[tableRule{table, r.key()}] = true
			}
		}
		if strings.TrimSpace(line) == "COMMIT" {
			table++
		}
	}

	var b strings.Builder
	b.Grow(len(text) + 256)
	for i, line := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
		if !isRule[i] {
			continue
		}
		twin, ok := preroutingTwin(rules[i])
		if !ok {
			continue
		}
		k := tableRule{tableOf[i], parseRule(twin).key()}
		if present[k] {
			continue
		}
		present[k] = true
		b.WriteByte('\n')
		b.WriteString(twin)
	}
	if endsInNewline {
		b.WriteByte('\n')
	}
	out = []byte(b.String())
	if bytes.Equal(out, save) {
		return save, false
	}
	return out, true
}

// rewriteDNSRule applies the per-line edits of RewriteDockerDNS to one rule.
func rewriteDNSRule(r rule, host string) string {
	line := r.line
	var edits []edit

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
				edits = append(edits, edit{start, start + len(dockerEmbeddedDNS), host})
			}
		case "--to-source":
			// Docker's SNAT rule rewrites the embedded server's random port
			// back to 53 but keeps the source address, 127.0.0.11. Replies
			// to a pod must come from the address the pod asked instead.
			if next == ":53" {
				edits = append(edits, edit{r.args[i+1].start, r.args[i+1].end, host + ":53"})
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
		edits = append(edits, edit{start, start, "--dport 53 "})
	}
	return applyEdits(line, edits)
}

// preroutingTwin returns "-A PREROUTING X -j DOCKER_OUTPUT" for a rule
// "-A OUTPUT X -j DOCKER_OUTPUT". Docker only sends the node's own (OUTPUT)
// DNS traffic to DOCKER_OUTPUT; pods' packets arrive through PREROUTING.
func preroutingTwin(r rule) (string, bool) {
	line := r.line
	n := len(r.args)
	if n < 4 || r.arg(0) != "-A" || r.arg(1) != "OUTPUT" || r.arg(n-2) != "-j" || r.arg(n-1) != "DOCKER_OUTPUT" {
		return "", false
	}
	return line[:r.args[1].start] + "PREROUTING" + line[r.args[1].end:], true
}

// rule is one iptables-save rule line split into its arguments, each kept as
// a byte range of the line so edits leave every other byte alone.
type rule struct {
	line string
	args []span
}

type span struct{ start, end int }

// parseRule splits a rule line the way iptables-restore does: on blanks,
// except inside double quotes, where a backslash escapes the next byte
// (iptables-save quotes a --comment that contains blanks). An unterminated
// quote runs to the end of the line.
func parseRule(line string) rule {
	// Room for every argument at once: one allocation per rule rather
	// than one per doubling (rules were a third of a plan's allocations).
	n := 1
	for i := 0; i < len(line); i++ {
		if isRuleBlank(line[i]) {
			n++
		}
	}
	r := rule{line: line, args: make([]span, 0, n)}
	i := 0
	for {
		for i < len(line) && isRuleBlank(line[i]) {
			i++
		}
		if i == len(line) {
			return r
		}
		start := i
		quoted := false
		for i < len(line) && (quoted || !isRuleBlank(line[i])) {
			switch {
			case quoted && line[i] == '\\' && i+1 < len(line):
				i++
			case line[i] == '"':
				quoted = !quoted
			}
			i++
		}
		r.args = append(r.args, span{start, i})
	}
}

// isRuleBlank also counts '\r' so that a CRLF file is rewritten the same as
// an LF one; the '\r' itself is kept.
func isRuleBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// arg returns argument i, or "" when there is none.
func (r rule) arg(i int) string {
	if i < 0 || i >= len(r.args) {
		return ""
	}
	return r.line[r.args[i].start:r.args[i].end]
}

// chain returns the chain a "-A CHAIN ..." rule appends to.
func (r rule) chain() string {
	if r.arg(0) != "-A" {
		return ""
	}
	return r.arg(1)
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

// edit replaces line[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// applyEdits applies non-overlapping edits, in any order.
func applyEdits(line string, edits []edit) string {
	if len(edits) == 0 {
		return line
	}
	slices.SortStableFunc(edits, func(a, b edit) int { return a.start - b.start })
	var b strings.Builder
	last := 0
	for _, e := range edits {
		b.WriteString(line[last:e.start])
		b.WriteString(e.text)
		last = e.end
	}
	b.WriteString(line[last:])
	return b.String()
}
