package check

import (
	"context"
	"errors"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// TestDNSForwarderRow: not needed on nodes of ipv4 clusters; planned but
// not queried in a replay or before boot; on a booted node, one query
// through the forwarder decides.
func TestDNSForwarderRow(t *testing.T) {
	booted := func(dir string) { write(t, dir, "proc/1/comm", "systemd\n") }
	for _, tt := range []struct {
		name   string
		host   string
		change func(dir string)
		live   bool
		err    error
		want   Status
		obs    string
	}{
		{"ipv4 cluster", "docker-v2-cgroupns", booted, true, nil, Pass, `^not needed: /proc/sys/net/ipv6/conf/all/forwarding is not 1`},
		{"no IPv6 address", "net-ipv6-forwarder", func(dir string) { write(t, dir, ".host/hosts", "kind-control-plane 172.18.0.2\n") }, true, nil, Pass, `^not needed: the node has no IPv6 address`},
		{"replay", "net-ipv6-forwarder", booted, false, nil, Pass, `^kind-dns-forwarder.service runs it at \[fc00:f853:ccd:e793::2\]:53 \(a replay: not queried\)$`},
		{"not booted", "net-ipv6-forwarder", nil, true, nil, Pass, `once the node boots`},
		{"answered", "net-ipv6-forwarder", booted, true, nil, Pass, `at \[fc00:f853:ccd:e793::2\]:53: answered in 1.5ms$`},
		{"not answered", "net-ipv6-forwarder", booted, true, errors.New("i/o timeout"), Fail, `a query for kind-control-plane's AAAA records: i/o timeout$`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tree := system.NewTree(host(t, tt.host, tt.change))
			env, _ := tree.Environ()
			var asked netip.AddrPort
			probe := func(_ context.Context, server netip.AddrPort, _ string) (time.Duration, error) {
				asked = server
				return 1500 * time.Microsecond, tt.err
			}
			rep := Run(context.Background(), Options{Sys: tree, LookupEnv: env, Live: tt.live, DNSProbe: probe, ProbeTimeout: 100 * time.Millisecond})
			r, ok := rowNamed(rep.Rows, dnsForwarderRow)
			if !ok {
				t.Fatal("no dns-forwarder row")
			}
			if r.Status != tt.want || !regexp.MustCompile(tt.obs).MatchString(r.Observed) {
				t.Errorf("row %+v, want %s matching %q", r, tt.want, tt.obs)
			}
			if queried := asked.IsValid(); queried != (tt.obs == `at \[fc00:f853:ccd:e793::2\]:53: answered in 1.5ms$` || tt.err != nil) {
				t.Errorf("queried %v (%s)", queried, asked)
			}
		})
	}
}
