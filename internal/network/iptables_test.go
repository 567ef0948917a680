package network

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// barrier is a System whose probes (commands and lookups) each wait until
// n of them are in flight at once: detection that runs them one after the
// other times out, so the test proves they run concurrently.
type barrier struct {
	*system.Tree
	n int

	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func newBarrier(tree *system.Tree, n int) *barrier {
	return &barrier{Tree: tree, n: n, all: make(chan struct{})}
}

func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return errors.New("probes ran one after the other")
	}
}

func (b *barrier) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, []byte, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := b.wait(wctx); err != nil {
		return nil, nil, err
	}
	return b.Tree.Run(ctx, argv, stdin, timeout)
}

func (b *barrier) LookupIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return b.Tree.LookupIP(ctx, network, host)
}

const dockerRules = `*nat
:OUTPUT ACCEPT [0:0]
:DOCKER_OUTPUT - [0:0]
-A OUTPUT -d 127.0.0.11/32 -j DOCKER_OUTPUT
-A DOCKER_OUTPUT -d 127.0.0.11/32 -p udp -m udp --dport 53 -j DNAT --to-destination 127.0.0.11:58291
COMMIT
`

func TestDetectIptablesRunsSavesConcurrently(t *testing.T) {
	tree := hosttest.Tree(t, map[string]string{
		".host/run/iptables-legacy-save":  "",
		".host/run/ip6tables-legacy-save": "",
		".host/run/iptables-nft-save":     dockerRules,
		".host/run/ip6tables-nft-save":    "*filter\n-A INPUT -j ACCEPT\nCOMMIT\n",
		"etc/alternatives/iptables":       "->/usr/sbin/iptables-legacy",
	})
	f, err := DetectIptables(t.Context(), newBarrier(tree, 4), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Saves {
		if s.Err != nil {
			t.Errorf("%s: %v", s.Command, s.Err)
		}
	}
	if legacy, nft := f.Counts(); legacy != 0 || nft != 3 {
		t.Errorf("counts legacy %d nft %d, want 0 and 3", legacy, nft)
	}
	if f.Mode() != NFT {
		t.Errorf("mode %s, want nft", f.Mode())
	}
	want := map[string]string{"iptables": "/usr/sbin/iptables-legacy", "ip6tables": ""}
	if diff := cmp.Diff(want, f.Links); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
}

func TestDetectIptablesHungSave(t *testing.T) {
	tree := hosttest.Tree(t, map[string]string{
		".host/run/iptables-legacy-save":    "*filter\n-A INPUT -j ACCEPT\nCOMMIT\n",
		".host/run/ip6tables-legacy-save":   "",
		".host/run/iptables-nft-save.hang":  "",
		".host/run/ip6tables-nft-save.hang": "",
	})
	start := time.Now()
	f, err := DetectIptables(t.Context(), tree, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Both hung saves share one timeout, not one each.
	if d := time.Since(start); d > time.Second {
		t.Errorf("detection took %s", d)
	}
	if f.Mode() != Legacy {
		t.Errorf("mode %s, want legacy", f.Mode())
	}
	if got := f.Describe(NFT); !strings.Contains(got, "timed out after 100ms") {
		t.Errorf("nft facts %q do not say it timed out", got)
	}
}

func TestIptablesMode(t *testing.T) {
	save := func(m Mode, n int, err error) Save { return Save{Mode: m, Rules: n, Err: err} }
	failed := errors.New("not found")
	tests := []struct {
		name  string
		saves []Save
		want  Mode
	}{
		{"nft holds more", []Save{save(Legacy, 2, nil), save(Legacy, 0, nil), save(NFT, 3, nil), save(NFT, 1, nil)}, NFT},
		{"legacy holds more", []Save{save(Legacy, 7, nil), save(NFT, 6, nil)}, Legacy},
		{"tie: legacy", []Save{save(Legacy, 4, nil), save(NFT, 4, nil)}, Legacy},
		{"nothing anywhere: legacy", []Save{save(Legacy, 0, failed), save(NFT, 0, failed)}, Legacy},
		{"failed legacy counts 0", []Save{save(Legacy, 0, failed), save(NFT, 1, nil)}, NFT},
	}
	for _, tt := range tests {
		if got := (IptablesFacts{Saves: tt.saves}).Mode(); got != tt.want {
			t.Errorf("%s: mode %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestPlanIptables(t *testing.T) {
	nft := []Save{{Mode: NFT, Rules: 1}}
	tests := []struct {
		name  string
		links map[string]string
		want  []string
	}{
		{"already nft", map[string]string{"iptables": "/usr/sbin/iptables-nft", "ip6tables": "/usr/sbin/ip6tables-nft"}, []string{
			"log INFO: setting iptables to detected mode: nft",
		}},
		{"legacy and unset", map[string]string{"iptables": "/usr/sbin/iptables-legacy"}, []string{
			"log INFO: setting iptables to detected mode: nft",
			"run update-alternatives --set iptables /usr/sbin/iptables-nft >/dev/null (timeout 10s)",
			"run update-alternatives --set ip6tables /usr/sbin/ip6tables-nft >/dev/null (timeout 10s)",
		}},
	}
	for _, tt := range tests {
		got := plan.Strings(PlanIptables(IptablesFacts{Saves: nft, Links: tt.links}))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestLegacySaveNotRunWithoutTables: a legacy save prints only the tables
// /proc/net/ip{,6}_tables_names lists; an empty list means no rules, known
// without starting it. A list with a table, or no list at all, runs it.
func TestLegacySaveNotRunWithoutTables(t *testing.T) {
	tree := hosttest.Tree(t, map[string]string{
		"proc/net/ip_tables_names":        "",
		"proc/net/ip6_tables_names":       "nat\n",
		".host/run/iptables-legacy-save":  "*filter\n-A INPUT -j ACCEPT\nCOMMIT\n",
		".host/run/ip6tables-legacy-save": "*nat\n-A OUTPUT -j ACCEPT\nCOMMIT\n",
		".host/run/iptables-nft-save":     dockerRules,
		".host/run/ip6tables-nft-save":    "",
	})
	f, err := DetectIptables(t.Context(), tree, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, argv := range tree.Ran() {
		ran[argv[0]] = true
	}
	want := map[string]bool{"ip6tables-legacy-save": true, "iptables-nft-save": true, "ip6tables-nft-save": true}
	if diff := cmp.Diff(want, ran); diff != "" {
		t.Errorf("programs run (-want +got):\n%s", diff)
	}
	if legacy, nft := f.Counts(); legacy != 1 || nft != 2 {
		t.Errorf("counts legacy %d nft %d, want 1 and 2", legacy, nft)
	}
	if got := f.Describe(Legacy); !strings.Contains(got, "iptables-legacy-save not run: /proc/net/ip_tables_names lists no table") {
		t.Errorf("legacy facts %q", got)
	}
	// No list: the save runs (ip_tables not loaded, or an older capture).
	if err := hosttest.Files(t, tree).Remove("/proc/net/ip_tables_names"); err != nil {
		t.Fatal(err)
	}
	if f, _ = DetectIptables(t.Context(), tree, 2*time.Second); f.Saves[0].NotRun != "" || f.Saves[0].Rules != 1 {
		t.Errorf("without the list: %+v", f.Saves[0])
	}
}

// TestSaveOverRuleCap: a save of more than MaxSaveRules rule lines is
// refused with an error naming the command and the cap, keeps no output,
// and counts 0 like any failed save; one at the cap is read. Step 9 warns.
func TestSaveOverRuleCap(t *testing.T) {
	for _, tc := range []struct {
		rules   int
		refused bool
	}{{MaxSaveRules, false}, {MaxSaveRules + 1, true}} {
		tree := hosttest.Tree(t, map[string]string{
			".host/run/iptables-legacy-save":  "",
			".host/run/ip6tables-legacy-save": "",
			".host/run/iptables-nft-save":     strings.Repeat("-\n", tc.rules),
			".host/run/ip6tables-nft-save":    "",
		})
		f, err := DetectIptables(t.Context(), tree, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		s := f.Saves[2]
		if !tc.refused {
			if s.Err != nil || s.Rules != MaxSaveRules {
				t.Errorf("%d rules: %d counted, %v", tc.rules, s.Rules, s.Err)
			}
			continue
		}
		if s.Err == nil || !strings.Contains(s.Err.Error(), "iptables-nft-save: ") || !strings.Contains(s.Err.Error(), "MaxSaveRules") {
			t.Errorf("%d rules: error %v, want one naming the save and the cap", tc.rules, s.Err)
		}
		if s.Output != nil || s.Rules != 0 {
			t.Errorf("%d rules: kept %d bytes, counted %d", tc.rules, len(s.Output), s.Rules)
		}
		var warned bool
		for _, a := range PlanIptables(f) {
			warned = warned || a.Op == plan.OpLog && a.Level == logline.Warn && strings.HasPrefix(string(a.Data), "iptables-nft-save: ")
		}
		if !warned {
			t.Errorf("%d rules: step 9 plans no WARN for the refused save", tc.rules)
		}
	}
}
