package main

import (
	"bufio"
	"bytes"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward/dnstest"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

func TestDNSForwarderUsage(t *testing.T) {
	for _, args := range [][]string{
		{"dns-forwarder"},
		{"dns-forwarder", "--listen", "[::1]:53"},
		{"dns-forwarder", "--listen", "::1", "--upstream", "127.0.0.1:53"},
		{"dns-forwarder", "--listen", "[::1]:53", "--upstream", "127.0.0.1:53", "extra"},
		{"dns-forwarder", "--listen", "[::1]:53", "--upstream", "127.0.0.1:53", "--log-format", "xml"},
	} {
		var stdout, stderr bytes.Buffer
		if code := dispatch("entrypoint", args, nil, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr:\n%s", args, code, stderr.String())
		}
	}
}

// TestDNSForwarderCommand runs the built binary as its unit does, on
// loopback: it answers, logs, and ends cleanly on SIGTERM.
func TestDNSForwarderCommand(t *testing.T) {
	bin, ctx := binaryUnderTest(t, time.Minute)
	up := dnstest.Start(t, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0), 0)
	cmd := nstest.Command(ctx, bin, "dns-forwarder", "--listen", "[::1]:0", "--upstream", up.Addr.String())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	if !lines.Scan() {
		t.Fatalf("no log line: %v", lines.Err())
	}
	first := lines.Text()
	m := regexp.MustCompile(`^INFO: dns-forwarder: answering DNS on (\[::1\]:\d+) \(UDP and TCP\), forwarding to `).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first line %q", first)
	}
	for _, network := range []string{"udp", "tcp"} {
		c, err := net.Dial(network, m[1])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dnstest.Exchange(c, dnstest.Query(1, "kind-control-plane"), 5*time.Second); err != nil {
			t.Errorf("%s: %v", network, err)
		}
		c.Close()
	}
	cmd.Process.Signal(syscall.SIGTERM)
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM: %v", err)
	}
	want := "INFO: dns-forwarder: stopping; since the last report: 2 queries answered (UDP 1, TCP 1)"
	if strings.Join(rest, "\n") != want {
		t.Errorf("log after the first line:\n%s\nwant:\n%s", strings.Join(rest, "\n"), want)
	}
}
