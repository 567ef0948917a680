package etcdpeers

// Privileged: the rules for real, as root, in a network namespace (and a
// mount namespace, for iptables-legacy's lock file under a /run of its
// own) that the test makes; the machine's own rules are read before and
// after, on a thread outside.

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

// savedNAT is the nat table as the mode's save prints it, in the
// calling thread's network namespace.
func savedNAT(t *testing.T, mode string) string {
	t.Helper()
	out, stderr, err := system.Linux{}.Run(context.Background(), []string{saveCommand(mode, false), "-t", "nat"}, nil, RestoreTimeout)
	if err != nil {
		t.Fatalf("%s: %v: %s", saveCommand(mode, false), err, stderr)
	}
	return string(out)
}

func chainLines(saved string) []string {
	var out []string
	for line := range strings.Lines(saved) {
		if strings.Contains(line, Chain) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// TestRulesInNamespace: Watch installs the DNAT rules, with each
// backend, in the namespace it runs in, once, and nowhere else; the
// namespace takes them with it. Following, it replaces a moved peer's
// rule, the jump from OUTPUT still there once.
func TestRulesInNamespace(t *testing.T) {
	nstest.SkipEmulated(t, "starts iptables, a binary of the machine's architecture, in namespaces of its own")
	machine := func() map[string]string {
		m := map[string]string{}
		nstest.OnHost(func() {
			for _, mode := range []string{"legacy", "nft"} {
				out, _, err := system.Linux{}.Run(context.Background(), []string{saveCommand(mode, false), "-t", "nat"}, nil, RestoreTimeout)
				if err != nil {
					t.Errorf("%s on the machine: %v", saveCommand(mode, false), err)
				}
				m[mode] = strings.Join(chainLines(string(out)), "\n")
			}
		})
		return m
	}
	before := machine()
	nstest.Unshare(t, unix.CLONE_NEWNET|unix.CLONE_NEWNS)
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("a /run of the namespace's own: %v", err)
	}
	f := &fakeResolver{answers: map[string]string{"ip4 kind-control-plane2": "172.18.0.3", "ip4 kind-control-plane3": "172.18.0.5"}}
	for _, mode := range []string{"legacy", "nft"} {
		cfg := Config{Iptables: mode, Self: "kind-control-plane", Peers: cfg3.Peers[:2]}
		// Twice: the second run finds the jump and rewrites the chain.
		for range 2 {
			if err := Watch(context.Background(), linuxResolving{Linux: system.Linux{}, names: f}, logline.New(io.Discard, logline.Text), cfg, Rounds{Max: 1}); err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
		}
		got := chainLines(savedNAT(t, mode))
		want := []string{
			":" + Chain + " - [0:0]",
			"-A OUTPUT -j " + Chain,
			"-A " + Chain + " -d 172.18.0.5/32 -p tcp -m tcp --dport 2380 -j DNAT --to-destination 172.18.0.3:2380",
			"-A " + Chain + " -d 172.18.0.4/32 -p tcp -m tcp --dport 2380 -j DNAT --to-destination 172.18.0.5:2380",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: the namespace's rules:\n%s\nwant:\n%s", mode, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// A third run, following: kind-control-plane2 restarts alone
		// at .7, and its rule is replaced in place.
		ctx, cancel := context.WithCancel(context.Background())
		c := &clock{stop: 2, cancel: cancel, on: func(int) { f.answers["ip4 kind-control-plane2"] = "172.18.0.7" }}
		if err := Watch(ctx, linuxResolving{Linux: system.Linux{}, names: f}, logline.New(io.Discard, logline.Text), cfg, Rounds{Max: 1, Follow: time.Second, Wait: c.wait}); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: following: %v", mode, err)
		}
		f.answers["ip4 kind-control-plane2"] = "172.18.0.3"
		want[2] = strings.Replace(want[2], "172.18.0.3:2380", "172.18.0.7:2380", 1)
		if got := chainLines(savedNAT(t, mode)); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: the namespace's rules after a peer moved:\n%s\nwant:\n%s", mode, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	after := machine()
	for mode, lines := range after {
		if lines != before[mode] {
			t.Errorf("%s: the machine's nat rules of %s changed: %q, were %q", mode, Chain, lines, before[mode])
		}
	}
}

// linuxResolving is the machine (its iptables) with the fake resolver's
// names: no test sends a lookup anywhere.
type linuxResolving struct {
	system.Linux
	names *fakeResolver
}

func (l linuxResolving) LookupIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return l.names.LookupIP(ctx, network, host)
}
