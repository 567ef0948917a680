package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/network"
)

const dnsForwarderUsage = `usage: entrypoint dns-forwarder --listen [ADDR]:PORT --upstream ADDR:PORT [--log-format text|json]

Answers DNS over UDP and TCP on --listen and passes each query to
--upstream: on a node of an ipv6 or dual-stack cluster, the node's IPv6
address and the host IP that Docker's rules send on to its embedded DNS.
Step 10 writes the unit that runs it (` + network.ForwarderUnitName + `). Runs
until SIGTERM; logs a summary each --stats-interval in which it did
something.

flags:
`

// forwarderMemoryLimit is the forwarder's soft memory limit: its buffers
// hold at most dnsforward.Limits.MemoryBound (12 MiB with the default
// limits), the heap about twice what is live, and its unit's MemoryMax is
// 64 MiB; the collector runs harder before that is near.
const forwarderMemoryLimit = 40 << 20

func runDNSForwarder(args []string, _, stderr io.Writer) int {
	fl := toolFlagSet("entrypoint "+network.ForwarderCommand, dnsForwarderUsage, stderr)
	listen := fl.String("listen", "", "answer on `ADDR:PORT` (UDP and TCP)")
	upstream := fl.String("upstream", "", "ask the server at `ADDR:PORT`")
	logFormat := fl.String("log-format", string(logline.Text), "log format: text or json")
	interval := fl.Duration("stats-interval", time.Minute, "log a summary this often (when something happened)")
	if code, done := parseTool(fl, args, 2); done {
		return code
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "entrypoint %s: unexpected argument %q\n", network.ForwarderCommand, fl.Arg(0))
		return 2
	}
	lf, err := logline.ParseFormat(*logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "entrypoint:", err)
		return 2
	}
	cfg := dnsforward.Config{Limits: dnsforward.DefaultLimits(), Log: logline.New(stderr, lf)}
	for _, a := range []struct {
		name string
		s    string
		to   *netip.AddrPort
	}{{"--listen", *listen, &cfg.Listen}, {"--upstream", *upstream, &cfg.Upstream}} {
		if *a.to, err = netip.ParseAddrPort(a.s); err != nil {
			fmt.Fprintf(stderr, "entrypoint %s: %s %q: %v\n", network.ForwarderCommand, a.name, a.s, err)
			return 2
		}
	}
	if *interval <= 0 {
		fmt.Fprintf(stderr, "entrypoint %s: --stats-interval must be positive\n", network.ForwarderCommand)
		return 2
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(forwarderMemoryLimit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	f, err := dnsforward.Listen(ctx, cfg)
	if err != nil {
		cfg.Log.Error(err.Error())
		return 1
	}
	if err := f.Serve(ctx, *interval); err != nil {
		cfg.Log.Error(err.Error())
		return 1
	}
	return 0
}
