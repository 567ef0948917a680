package network

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// addFiles seeds f with the content of the testdata files matching pattern,
// passing each to add.
func addFiles(f *testing.F, pattern string, add func(content []byte)) {
	f.Helper()
	for _, x := range fixtures(f, pattern) {
		add(x.content)
	}
}

func FuzzRewriteDockerDNS(f *testing.F) {
	for _, tc := range rewriteDockerDNSTests {
		f.Add([]byte(tc.save), tc.hostIP)
	}
	addFiles(f, "iptables-*", func(c []byte) { f.Add(c, "172.18.0.1") })

	f.Fuzz(func(t *testing.T, save []byte, hostIP string) {
		orig := bytes.Clone(save)
		out, changed := RewriteDockerDNS(save, hostIP)
		if !bytes.Equal(save, orig) {
			t.Fatal("input modified")
		}
		if host, err := netip.ParseAddr(hostIP); err != nil || !host.Is4() {
			if changed || !bytes.Equal(out, save) {
				t.Fatalf("host IP %q is not IPv4, yet the rules changed", hostIP)
			}
			// Check the properties below with a usable address.
			hostIP = "172.18.0.1"
			out, changed = RewriteDockerDNS(save, hostIP)
		}
		if changed == bytes.Equal(out, save) {
			t.Fatalf("changed = %v, but output equal to input is %v", changed, bytes.Equal(out, save))
		}

		again, changedAgain := RewriteDockerDNS(out, hostIP)
		if changedAgain || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\nfirst:  %q\nsecond: %q", out, again)
		}
		if n, m := CountRules(save), CountRules(out); m < n {
			t.Fatalf("rule count went from %d to %d", n, m)
		}

		// Lines with nothing of the embedded DNS in them come through
		// unchanged and in order; every other output line is a rewritten
		// one or a PREROUTING twin.
		inLines := strings.Split(string(save), "\n")
		outLines := strings.Split(string(out), "\n")
		inSet := make(map[string]bool, len(inLines))
		var untouchable []string
		for _, l := range inLines {
			inSet[l] = true
			if !strings.Contains(l, dockerEmbeddedDNS) && !strings.Contains(l, "--to-source") {
				untouchable = append(untouchable, l)
			}
		}
		k := 0
		for _, l := range outLines {
			if k < len(untouchable) && l == untouchable[k] {
				k++
				continue
			}
			if !inSet[l] && !strings.Contains(l, hostIP) && !strings.Contains(l, "--dport 53") && !strings.Contains(l, "PREROUTING") {
				t.Fatalf("output line %q is neither from the input, nor rewritten, nor a twin", l)
			}
		}
		if k != len(untouchable) {
			t.Fatalf("input line %q without DNS rules was changed or lost", untouchable[k])
		}
		if len(outLines) < len(inLines) {
			t.Fatalf("%d lines became %d", len(inLines), len(outLines))
		}
	})
}

func FuzzRewriteResolvConf(f *testing.F) {
	for _, tc := range rewriteResolvConfTests {
		mode, search := uint8(0), ""
		if tc.search != nil {
			mode, search = 2, *tc.search
			if search == "" {
				mode = 1
			}
		}
		f.Add([]byte(tc.orig), tc.hostIP, search, mode)
	}
	// Blanks resolvers do not split at: the line is no nameserver line.
	f.Add([]byte("nameserver\v127.0.0.11\nnameserver 127.0.0.11\u00a0\n"), "172.18.0.1", "", uint8(0))
	addFiles(f, "resolv-*.input", func(c []byte) {
		f.Add(c, "172.18.0.1", "", uint8(0))
		f.Add(c, "172.18.0.1", "", uint8(1))
		f.Add(c, "172.18.0.1", "kind.test", uint8(2))
	})

	f.Fuzz(func(t *testing.T, orig []byte, hostIP, searchValue string, mode uint8) {
		var search *string
		switch mode % 3 {
		case 1:
			search = new(string)
		case 2:
			search = &searchValue
		}
		out, err := RewriteResolvConf(orig, hostIP, search)
		if host, perr := netip.ParseAddr(hostIP); perr != nil || host == netip.MustParseAddr(dockerEmbeddedDNS) {
			if err == nil {
				t.Fatalf("host IP %q accepted", hostIP)
			}
			hostIP = "172.18.0.1"
			out, err = RewriteResolvConf(orig, hostIP, search)
		}
		if search != nil && strings.ContainsFunc(*search, unicode.IsControl) {
			if err == nil {
				t.Fatalf("search %q accepted", *search)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}

		again, err := RewriteResolvConf(out, hostIP, search)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent (error %v):\nfirst:  %q\nsecond: %q", err, out, again)
		}
		if !bytes.HasSuffix(out, []byte("\n")) || bytes.HasSuffix(out, []byte("\n\n")) {
			t.Fatalf("output does not end in exactly one newline: %q", out)
		}

		// The step decides by namesEmbeddedDNS whether the node still
		// uses Docker's DNS (and so whether the rules must serve it):
		// it must read a line as the rewrite does.
		if namesEmbeddedDNS(out) {
			t.Fatalf("the rewritten %q still names the embedded DNS for the step", out)
		}

		blank := func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' }
		outLines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		searchLines := 0
		for i, l := range outLines {
			fields := strings.FieldsFunc(l, blank)
			if len(fields) > 1 && fields[0] == "nameserver" && fields[1] == dockerEmbeddedDNS {
				t.Fatalf("line %q still names the embedded DNS", l)
			}
			if len(fields) > 0 && fields[0] == "search" {
				searchLines++
				if search != nil && (*search == "" || i > 0) {
					t.Fatalf("search line %q kept", l)
				}
			}
		}
		if search != nil && *search != "" && (outLines[0] != "search "+*search || searchLines != 1) {
			t.Fatalf("first line %q, %d search lines; want only %q first", outLines[0], searchLines, "search "+*search)
		}

		// Lines that are neither nameserver nor search lines are kept, in
		// order; only empty lines may go, when they end up last.
		k := 0
		for l := range strings.SplitSeq(strings.TrimRight(string(orig), "\n"), "\n") {
			if fields := strings.FieldsFunc(l, blank); l == "" || len(fields) > 0 && (fields[0] == "nameserver" || fields[0] == "search") {
				continue
			}
			for k < len(outLines) && outLines[k] != l {
				k++
			}
			if k == len(outLines) {
				t.Fatalf("line %q lost", l)
			}
			k++
		}
	})
}

func FuzzReplaceAddress(f *testing.F) {
	for _, tc := range replaceAddressTests {
		f.Add([]byte(tc.content), tc.old, tc.new)
	}
	addFiles(f, "address-v4-*.input", func(c []byte) { f.Add(c, "172.18.0.3", "172.18.0.4") })
	addFiles(f, "address-v6-*.input", func(c []byte) { f.Add(c, "fc00:f853:ccd:e793::3", "fc00:f853:ccd:e793::4") })

	f.Fuzz(func(t *testing.T, content []byte, old, new string) {
		orig := bytes.Clone(content)
		out, n, err := ReplaceAddress(content, old, new)
		if !bytes.Equal(content, orig) {
			t.Fatal("input modified")
		}
		if err != nil {
			if out != nil || n != 0 {
				t.Fatalf("got %q, %d along with error %v", out, n, err)
			}
			return
		}
		if new == "" || old == "" {
			t.Fatalf("replaced %q with %q", old, new)
		}
		if old == new && (n != 0 || !bytes.Equal(out, content)) {
			t.Fatalf("old == new changed the content: %q, %d", out, n)
		}
		if want := len(content) + n*(len(new)-len(old)); len(out) != want {
			t.Fatalf("output is %d bytes, want %d for %d replacements", len(out), want, n)
		}

		again, n2, err := ReplaceAddress(out, old, new)
		if err != nil || n2 != 0 || !bytes.Equal(again, out) {
			t.Fatalf("second pass: %d replacements, error %v", n2, err)
		}

		// An independent statement of the boundary rule: a word byte on
		// either side, except a ':' right after an IPv4 address.
		right := `[^A-Za-z0-9_.:]`
		if netip.MustParseAddr(old).Is4() {
			right = `[^A-Za-z0-9_.]`
		}
		whole := regexp.MustCompile(`(?:^|[^A-Za-z0-9_.:])` + regexp.QuoteMeta(old) + `(?:$|` + right + `)`)
		if old != new {
			if loc := whole.FindIndex(out); loc != nil {
				t.Fatalf("whole-word %q left at %v in %q", old, loc, out)
			}
			if (n > 0) != whole.Match(content) {
				t.Fatalf("%d replacements, but the content has a whole-word %q: %v", n, old, whole.Match(content))
			}
		}
	})
}

func FuzzDefaultGatewayV4(f *testing.F) {
	for _, tc := range defaultGatewayV4Tests {
		f.Add([]byte(tc.table))
	}
	addFiles(f, "route-*", func(c []byte) { f.Add(c) })

	f.Fuzz(func(t *testing.T, table []byte) {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			gw, err := defaultGatewayV4(table, order)
			switch {
			case err != nil && gw.IsValid():
				t.Fatalf("got %v along with error %v", gw, err)
			case err == nil && (!gw.Is4() || !UsableHostIP(gw)):
				t.Fatalf("gateway %v is not a usable IPv4 address", gw)
			}
		}
	})
}
