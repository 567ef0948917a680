package network

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// dockerNative is `nft --json list ruleset` of Docker 29's table ip
// docker-dns, as nft 1.0.6 lists it (the golden host net-native-dns).
func dockerNative(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/hosts/net-native-dns/root/.host/run/nft")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRulesetDocker(t *testing.T) {
	rs, err := ParseRuleset(dockerNative(t))
	if err != nil {
		t.Fatal(err)
	}
	if rs.Tables != 1 || rs.Rules != 4 || len(rs.NAT) != 4 {
		t.Errorf("tables %d, rules %d, NAT rules %d; want 1, 4, 4", rs.Tables, rs.Rules, len(rs.NAT))
	}
	d, ok := rs.DockerRedirect()
	if want := (DockerRedirect{Table: "docker-dns", UDPPort: 39499, TCPPort: 43261}); !ok || d != want {
		t.Errorf("DockerRedirect() = %+v, %t; want %+v", d, ok, want)
	}
	want := []string{
		"output: ip daddr 127.0.0.11 udp dport 53 dnat to 127.0.0.11:39499",
		"output: ip daddr 127.0.0.11 tcp dport 53 dnat to 127.0.0.11:43261",
		"postrouting: ip saddr 127.0.0.11 udp sport 39499 snat to :53",
		"postrouting: ip saddr 127.0.0.11 tcp sport 43261 snat to :53",
	}
	var got []string
	for _, r := range rs.NAT {
		got = append(got, r.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

// TestParseRulesetHostile: the look-alikes of the golden host
// net-native-hostile are never taken for Docker's redirect; its real
// table, listed last, is.
func TestParseRulesetHostile(t *testing.T) {
	b, err := os.ReadFile("../../testdata/hosts/net-native-hostile/root/.host/run/nft")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ParseRuleset(b)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := rs.DockerRedirect()
	if want := (DockerRedirect{Table: "docker-dns", UDPPort: 39499, TCPPort: 43261}); !ok || d != want {
		t.Errorf("DockerRedirect() = %+v, %t; want %+v", d, ok, want)
	}
}

func TestParseRulesetBad(t *testing.T) {
	const secret = "SECRET-MARKER-nft"
	for _, tt := range []struct {
		name, in string
		err      bool
	}{
		{"empty", "", true},
		{"garbage", "Error: " + secret, true},
		{"truncated", `{"nftables": [{"table": {"name": "` + secret, true},
		{"wrong type", `{"nftables": {"` + secret + `": 1}}`, true},
		{"wrong field type", `{"nftables": [{"rule": {"table": 7, "chain": "` + secret + `"}}]}`, true},
		{"null", "null", false},
		{"no nftables", `{"` + secret + `": []}`, false},
		{"metainfo only", `{"nftables": [{"metainfo": {"version": "1.0.6"}}]}`, false},
		{"a rule without a chain", `{"nftables": [{"rule": {"family": "ip", "table": "x", "chain": "y", "expr": [{"dnat": {"addr": "127.0.0.11", "port": 5}}]}}]}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := ParseRuleset([]byte(tt.in))
			if (err != nil) != tt.err {
				t.Fatalf("ParseRuleset: %v, want an error: %t", err, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("the error quotes its input: %v", err)
			}
			if _, ok := rs.DockerRedirect(); ok {
				t.Errorf("a redirect found in %q", tt.in)
			}
		})
	}
}

func TestParseRulesetCap(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"nftables": [`)
	for i := range MaxNativeRules + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"rule":{}}`)
	}
	b.WriteString(`]}`)
	if _, err := ParseRuleset([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "MaxNativeRules") {
		t.Errorf("ParseRuleset of %d rules: %v, want the cap's error", MaxNativeRules+1, err)
	}
}

func TestPlanNativeDNS(t *testing.T) {
	host := netip.MustParseAddr("172.18.0.1")
	rs, err := ParseRuleset(dockerNative(t))
	if err != nil {
		t.Fatal(err)
	}
	n := NativeFacts{Ruleset: rs}
	actions, served := planNativeDNS(n, host)
	if !served || len(actions) != 1 || actions[0].Op != plan.OpRun {
		t.Fatalf("planNativeDNS = %v, %t; want one nft run, served", plan.Strings(actions), served)
	}
	script := string(actions[0].Extras().Stdin)
	for _, want := range []string{
		"table ip kind-dns\ndelete table ip kind-dns\ntable ip kind-dns {\n",
		"chain prerouting {\n\t\ttype nat hook prerouting priority -100; policy accept;\n\t\tip daddr 172.18.0.1 udp dport 53 dnat to 127.0.0.11:39499\n\t\tip daddr 172.18.0.1 tcp dport 53 dnat to 127.0.0.11:43261\n",
		"ip saddr 127.0.0.11 tcp sport 43261 snat to 172.18.0.1:53\n",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("the nft file lacks %q:\n%s", want, script)
		}
	}

	// Our table in place with these ports: nothing to do. With a port
	// of Docker's last start: rewritten.
	ours := append(rs.NAT[:len(rs.NAT):len(rs.NAT)], nativeRules(DockerRedirect{Table: "docker-dns", UDPPort: 39499, TCPPort: 43261}, host)...)
	if a, served := planNativeDNS(NativeFacts{Ruleset: Ruleset{NAT: ours}}, host); len(a) != 0 || !served {
		t.Errorf("with our table in place: %v, served %t; want nothing, served", plan.Strings(a), served)
	}
	stale := append(rs.NAT[:len(rs.NAT):len(rs.NAT)], nativeRules(DockerRedirect{Table: "docker-dns", UDPPort: 1, TCPPort: 43261}, host)...)
	if a, _ := planNativeDNS(NativeFacts{Ruleset: Ruleset{NAT: stale}}, host); len(a) != 1 {
		t.Errorf("with a stale port in our table: %v, want it rewritten", plan.Strings(a))
	}

	// Only one protocol redirected: only its rules.
	udp := NativeFacts{Ruleset: Ruleset{NAT: rs.NAT[:1]}}
	if a, served := planNativeDNS(udp, host); !served || len(a) != 1 || strings.Contains(string(a[0].Extras().Stdin), "tcp") {
		t.Errorf("udp only: %v", plan.Strings(a))
	}
	// No redirect, nft not run, or nft failed: nothing, not served.
	for _, n := range []NativeFacts{{}, {NotRun: "x", Ruleset: rs}, {Err: fmt.Errorf("nft: failed"), Ruleset: rs}} {
		if a, served := planNativeDNS(n, host); len(a) != 0 || served {
			t.Errorf("planNativeDNS(%+v) = %v, %t; want nothing", n, plan.Strings(a), served)
		}
	}
}

// FuzzParseRuleset: any input is parsed without panic, an error quotes
// none of it, and a redirect found is one of real ports.
func FuzzParseRuleset(f *testing.F) {
	f.Add(dockerNative(f))
	f.Add([]byte(`{"nftables": [{"chain": {"family": "ip", "table": "t", "name": "c", "type": "nat", "hook": "output"}}, {"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "127.0.0.11"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 53}}, {"dnat": {"addr": "127.0.0.11", "port": 5353}}]}}]}`))
	f.Add([]byte(`{"nftables": [{"rule": {"expr": [{"dnat": {"port": "SECRET"}}]}}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		rs, err := ParseRuleset(in)
		if err != nil {
			if len(in) >= 8 && strings.Contains(err.Error(), string(in)) {
				t.Errorf("the error quotes its input: %v", err)
			}
			return
		}
		if d, ok := rs.DockerRedirect(); ok && (d.UDPPort == 0 && d.TCPPort == 0) {
			t.Errorf("a redirect with no port: %+v", d)
		}
	})
}

// BenchmarkParseRuleset reads the hostile golden host's ruleset (156 KB,
// 400 ordinary rules and every look-alike of Docker's redirect).
func BenchmarkParseRuleset(b *testing.B) {
	in, err := os.ReadFile("../../testdata/hosts/net-native-hostile/root/.host/run/nft")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRuleset(in); err != nil {
			b.Fatal(err)
		}
	}
}
