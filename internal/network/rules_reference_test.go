package network

// This file holds the rewrite of Docker's DNS rules as it was before it
// kept state only for the rules it changes: a line at a time, with a slot
// for every line. It is the oracle FuzzRewriteDockerDNSSame compares the
// rewrite with: the two passes must change nothing of what it does.

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

func rewriteDockerDNSPerLine(save []byte, hostIP string) (out []byte, changed bool) {
	host, err := netip.ParseAddr(hostIP)
	if err != nil || !host.Is4() || len(save) == 0 {
		return save, false
	}
	// ParseAddr takes an IPv4 address only in its one spelling (dotted
	// decimal, no leading zeros, no zone): hostIP is host.String().
	hostText := hostIP

	text := string(save)
	endsInNewline := strings.HasSuffix(text, "\n")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")

	// The arguments of the rule at hand (its edited form and its twin
	// too) share one array, emptied for each rule: nothing keeps a rule's
	// arguments past its own line, so a save of any size needs only as
	// many as its longest rule. The edited rules and their twins share one
	// buffer (see rewriteDNSRule): a rule set of a few dozen rules was a
	// few allocations per rule.
	spans := make([]span, 0, 64)
	var edited strings.Builder
	edited.Grow(len(text))

	// A PREROUTING twin is only added when its table lacks it, which is what
	// makes a second run a no-op. Tables are told apart by position ("*name"
	// starts one, "COMMIT" ends it), not by name, so a twin is only ever
	// compared with rules that iptables-restore would load alongside it.
	type tableRule struct {
		table int
		rule  string
	}
	// Only lines starting with '-' are rules, as for CountRules; each is
	// parsed once, after its edits. twin is the rule's PREROUTING twin,
	// if it has one, and twinKey that twin's key in its table.
	twins := make([]struct {
		twin    string
		twinKey tableRule
	}, len(lines))
	present := make(map[tableRule]bool)
	table := 0
	for i, line := range lines {
		if strings.HasPrefix(line, "*") {
			table++
		}
		if strings.HasPrefix(line, "-") {
			var r rule
			r, spans = appendRule(spans[:0], line)
			if e := rewriteDNSRule(&edited, r, hostText); e != line {
				line = e
				r, spans = appendRule(spans, line)
				lines[i] = line
			}
			if r.arg(0) == "-A" && r.arg(1) == "PREROUTING" {
				present[tableRule{table, r.key()}] = true
			}
			if twin, ok := preroutingTwin(&edited, r); ok {
				var t rule
				t, spans = appendRule(spans, twin)
				twins[i].twin, twins[i].twinKey = twin, tableRule{table, t.key()}
			}
		}
		if strings.TrimSpace(line) == "COMMIT" {
			table++
		}
	}

	// At most every line of the text, and every edited line and twin.
	out = make([]byte, 0, len(text)+edited.Len()+1)
	for i, line := range lines {
		if i > 0 {
			out = append(out, '\n')
		}
		out = append(out, line...)
		if t := twins[i]; t.twin != "" && !present[t.twinKey] {
			present[t.twinKey] = true
			out = append(out, '\n')
			out = append(out, t.twin...)
		}
	}
	if endsInNewline {
		out = append(out, '\n')
	}
	if bytes.Equal(out, save) {
		return save, false
	}
	return out, true
}

// FuzzRewriteDockerDNSSame: the rewrite gives what the rewrite a line at
// a time gave, on any text.
func FuzzRewriteDockerDNSSame(f *testing.F) {
	for _, tc := range rewriteDockerDNSTests {
		f.Add([]byte(tc.save), tc.hostIP)
	}
	addFiles(f, "iptables-*", func(c []byte) { f.Add(c, "172.18.0.1") })
	f.Add([]byte("*nat\n-A PREROUTING -j DOCKER_OUTPUT\n-A OUTPUT -j DOCKER_OUTPUT\nCOMMIT\n*nat\n-A OUTPUT -j DOCKER_OUTPUT"), "1.2.3.4")
	f.Add([]byte("-A X -d 127.0.0.11 -d 127.0.0.11 -d 127.0.0.11 -d 127.0.0.11 -p tcp -j DNAT --to-destination 127.0.0.11\n"), "1.2.3.4")
	f.Fuzz(func(t *testing.T, save []byte, hostIP string) {
		want, wantChanged := rewriteDockerDNSPerLine(save, hostIP)
		got, changed := RewriteDockerDNS(save, hostIP)
		if changed != wantChanged || !bytes.Equal(got, want) {
			t.Fatalf("RewriteDockerDNS(%q, %q) = %q, %v; a line at a time: %q, %v", save, hostIP, got, changed, want, wantChanged)
		}
	})
}
