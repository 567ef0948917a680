package network

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

var node6 = netip.MustParseAddr("fc00:f853:ccd:e793::2")

// ipv6Facts is facts() on a node of an ipv6 or dual-stack cluster.
func ipv6Facts() MagicFacts {
	f := facts()
	f.IPv6.Addr, f.IPv6.Err = node6, nil
	f.IPv6Forwarding = true
	return f
}

func TestWithForwarder(t *testing.T) {
	old := netip.MustParseAddr("fc00:f853:ccd:e793::9")
	for _, tt := range []struct {
		name, in, want string
		ok             bool
	}{
		{"first boot", "nameserver 172.18.0.1\noptions ndots:0\n", "nameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::2\noptions ndots:0\n", true},
		{"again: unchanged", "nameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::2\noptions ndots:0\n", "nameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::2\noptions ndots:0\n", true},
		{"restart: the old address goes", "nameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::9\n", "nameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::2\n", true},
		{"after the host's line, wherever it is", "search a\nnameserver 8.8.8.8\nnameserver 172.18.0.1\n", "search a\nnameserver 8.8.8.8\nnameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::2\n", true},
		{"last line without a newline", "nameserver 172.18.0.1", "nameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::2\n", true},
		{"not Docker's: left alone", "nameserver 8.8.8.8\nnameserver fc00:f853:ccd:e793::9\n", "nameserver 8.8.8.8\nnameserver fc00:f853:ccd:e793::9\n", false},
		{"a comment naming it stays", "# nameserver fc00:f853:ccd:e793::2\nnameserver 172.18.0.1\n", "# nameserver fc00:f853:ccd:e793::2\nnameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::2\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := withForwarder([]byte(tt.in), gateway, node6, old)
			if diff := cmp.Diff(tt.want, string(got)); diff != "" || ok != tt.ok {
				t.Errorf("ok %v, want %v; (-want +got):\n%s", ok, tt.ok, diff)
			}
		})
	}
}

func TestForwarderUnit(t *testing.T) {
	u := ForwarderUnit(plan.DefaultExecutable, node6, gateway)
	want := `[Unit]
Description=DNS for IPv6-only pods: forwards to Docker's embedded DNS via 172.18.0.1
StartLimitIntervalSec=60
StartLimitBurst=5

[Service]
Type=exec
ExecStart=/usr/local/bin/entrypoint dns-forwarder --listen [fc00:f853:ccd:e793::2]:53 --upstream 172.18.0.1:53
Restart=on-failure
RestartSec=2
MemoryMax=64M
TasksMax=64

[Install]
WantedBy=multi-user.target
`
	if diff := cmp.Diff(want, string(u.Render())); diff != "" {
		t.Errorf("unit (-want +got):\n%s", diff)
	}
	if u.Path() != "/run/systemd/system/kind-dns-forwarder.service" || u.WantsLink() != "/run/systemd/system/multi-user.target.wants/kind-dns-forwarder.service" {
		t.Errorf("paths %s, %s", u.Path(), u.WantsLink())
	}
}

// TestPlanMagicForwarderExecutable: the unit runs the binary boot names
// (an image with it only at /entrypoint), the default one when none is
// named; a node where that unit is installed plans nothing of it, yet
// still runs the forwarder.
func TestPlanMagicForwarderExecutable(t *testing.T) {
	const unitPath = plan.RuntimeUnitDir + "/" + ForwarderUnitName
	for _, tt := range []struct{ exe, want string }{
		{"", "ExecStart=/usr/local/bin/entrypoint dns-forwarder "},
		{"/entrypoint", "ExecStart=/entrypoint dns-forwarder "},
	} {
		f := ipv6Facts()
		f.Executable = tt.exe
		actions, err := PlanMagic(f)
		if err != nil {
			t.Fatal(err)
		}
		unit := find(actions, plan.OpWrite, unitPath)
		if unit == nil || !strings.Contains(string(unit.Data), tt.want) || unit.OnFail != plan.Warn {
			t.Fatalf("executable %q: unit %+v, want a warned write holding %q", tt.exe, unit, tt.want)
		}
		f.Forwarder = plan.Installed{Unit: unit.Data, Link: new("../" + ForwarderUnitName)}
		again, err := PlanMagic(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range again {
			if strings.HasPrefix(a.Path, plan.RuntimeUnitDir) {
				t.Errorf("executable %q, installed: planned %s %s", tt.exe, a.Op, a.Path)
			}
		}
		if !ForwarderPlanned(again) {
			t.Errorf("executable %q, installed: the forwarder is not planned", tt.exe)
		}
	}
}

// TestPlanMagicForwarder: the forwarder and its nameserver line only on a
// node of a cluster with an IPv6 family, and only where pods use Docker's
// DNS through the host IP; every other node's plan is as before.
func TestPlanMagicForwarder(t *testing.T) {
	ipv4Cluster := ipv6Facts()
	ipv4Cluster.IPv6Forwarding = false
	noIPv6 := ipv6Facts()
	noIPv6.IPv6.Addr, noIPv6.IPv6.Err = netip.Addr{}, errors.New("no such host")
	notDocker := ipv6Facts()
	notDocker.Resolv = &File{Path: ResolvConf, Data: []byte("nameserver 10.0.0.53\n"), Mode: 0o644}
	notDocker.Rules.Value = nil
	noHost := ipv6Facts()
	noHost.Gateway.Value, noHost.Gateway.Err = netip.Addr{}, errors.New("no default route")
	for _, tt := range []struct {
		name       string
		f          MagicFacts
		wantResolv string
		wantUnit   bool
	}{
		{"ipv6 or dual cluster", ipv6Facts(), "# Generated by Docker Engine.\n\nnameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::2\nsearch corp.example.com\nsearch lab.example.com\noptions edns0 trust-ad ndots:0\n", true},
		{"ipv4 cluster on a dual-stack network", ipv4Cluster, "# Generated by Docker Engine.\n\nnameserver 172.18.0.1\nsearch corp.example.com\nsearch lab.example.com\noptions edns0 trust-ad ndots:0\n", false},
		{"no IPv6 address", noIPv6, "# Generated by Docker Engine.\n\nnameserver 172.18.0.1\nsearch corp.example.com\nsearch lab.example.com\noptions edns0 trust-ad ndots:0\n", false},
		{"not Docker's DNS", notDocker, "", false},
		{"no host IP", noHost, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			actions, err := PlanMagic(tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantResolv, resolvWritten(actions)); diff != "" {
				t.Errorf("resolv.conf (-want +got):\n%s", diff)
			}
			unit := find(actions, plan.OpWrite, plan.RuntimeUnitDir+"/"+ForwarderUnitName)
			if (unit != nil) != tt.wantUnit || ForwarderPlanned(actions) != tt.wantUnit {
				t.Errorf("forwarder unit planned: %v (%v), want %v", unit != nil, ForwarderPlanned(actions), tt.wantUnit)
			}
			if unit != nil && !strings.Contains(string(unit.Data), "--listen [fc00:f853:ccd:e793::2]:53 --upstream 172.18.0.1:53") {
				t.Errorf("unit:\n%s", unit.Data)
			}
		})
	}
}

// TestPlanMagicForwarderRestart: a new IPv6 address replaces the old one's
// line, and the original (Docker's file) is not overwritten with ours.
func TestPlanMagicForwarderRestart(t *testing.T) {
	f := ipv6Facts()
	f.Resolv.Data = []byte("nameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::9\n")
	f.OriginalExists = true
	f.IPv6.Old = new("fc00:f853:ccd:e793::9")
	f.IPv4.Old = new("172.18.0.2")
	actions, err := PlanMagic(f)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resolvWritten(actions), "nameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::2\n"; got != want {
		t.Errorf("resolv.conf %q, want %q", got, want)
	}
	if a := find(actions, plan.OpWrite, ResolvConfOriginal); a != nil {
		t.Errorf("overwrote the original with %q", a.Data)
	}
}

// FuzzWithForwarder: whatever resolv.conf holds, the forwarder's line is
// added at most once, right after the host IP's line, a second run
// changes nothing, and every other line is kept in order.
func FuzzWithForwarder(f *testing.F) {
	f.Add([]byte("nameserver 172.18.0.1\noptions ndots:0\n"))
	f.Add([]byte("nameserver 172.18.0.1\nnameserver fc00:f853:ccd:e793::9\nnameserver fc00:f853:ccd:e793::2"))
	f.Add([]byte("search a\n nameserver\t172.18.0.1 \nnameserver 172.18.0.1\n"))
	f.Add([]byte("nameserver 8.8.8.8\n"))
	old := netip.MustParseAddr("fc00:f853:ccd:e793::9")
	line := "nameserver " + node6.String()
	f.Fuzz(func(t *testing.T, in []byte) {
		out, ok := withForwarder(in, gateway, node6, old)
		if !ok {
			if string(out) != string(in) {
				t.Fatalf("not Docker's, yet changed:\n%q\n%q", in, out)
			}
			return
		}
		again, ok2 := withForwarder(out, gateway, node6, old)
		if !ok2 || string(again) != string(out) {
			t.Fatalf("a second run changed it:\n%q\n%q", out, again)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		n := 0
		for i, l := range lines {
			if l == line {
				n++
				if i == 0 {
					t.Fatalf("the forwarder's line first:\n%q", out)
				}
			}
		}
		if n != 1 {
			t.Fatalf("%d forwarder lines:\n%q", n, out)
		}
		if len(out) > len(in)+len(line)+2 {
			t.Fatalf("grew by %d bytes", len(out)-len(in))
		}
	})
}
