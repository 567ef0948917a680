// Command dnsquery asks one DNS server for a name's addresses over UDP or
// TCP, and nothing else: no /etc/hosts, no other server, no fallback from
// one transport to the other. The Docker 29 tier (test/e2e/docker29_test.go)
// copies it, static, into nodes that may have no DNS client, and runs it
// in the node and in a pod-like network namespace inside it.
//
//	dnsquery -server 172.18.0.1 -proto tcp other-node
//
// It prints the addresses, one a line, and exits 0; on any failure it
// prints the error to stderr and exits 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	server := flag.String("server", "", "the DNS server's IP address (port 53)")
	proto := flag.String("proto", "udp", "udp or tcp")
	timeout := flag.Duration("timeout", 5*time.Second, "how long the lookup may take")
	flag.Parse()
	if *server == "" || flag.NArg() != 1 || (*proto != "udp" && *proto != "tcp") {
		fmt.Fprintln(os.Stderr, "usage: dnsquery -server IP [-proto udp|tcp] [-timeout D] NAME")
		os.Exit(2)
	}
	addrs, err := lookup(net.JoinHostPort(*server, "53"), *proto, flag.Arg(0), *timeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dnsquery: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(addrs, "\n"))
}

// lookup asks server (host:port) over proto for the A records of name. Go's own
// resolver speaks DNS's stream framing on a conn that is not a PacketConn,
// so a Dial that returns a TCP conn makes every query go over TCP.
func lookup(server, proto, name string, timeout time.Duration) ([]string, error) {
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, proto, server)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The trailing dot: no search domain of resolv.conf is tried.
	ips, err := r.LookupNetIP(ctx, "ip4", strings.TrimSuffix(name, ".")+".")
	if err != nil {
		// Go's error names resolv.conf's server, not the one asked.
		return nil, fmt.Errorf("%s over %s to %s: %w", name, proto, server, err)
	}
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out, nil
}
