package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// TestEtcdPeersRow: the row shows the membership of an HA control
// plane, warns on an unreadable one, and is absent where there is no
// etcd data.
func TestEtcdPeersRow(t *testing.T) {
	const db = "var/lib/etcd/member/snap/db"
	for _, tc := range []struct {
		name, host string
		change     func(dir string)
		want       Status
		obs        string // a part of the observation; "" means no row
	}{
		{"ha", "net-ha-restart", nil, Pass, "3 members (kind-control-plane, kind-control-plane2, kind-control-plane3)"},
		{"corrupt", "net-ha-restart", func(dir string) { write(t, dir, db, "not bbolt") }, Warn, "membership unreadable"},
		{"single", "net-ha-restart", func(dir string) {
			b, err := os.ReadFile(filepath.Join("..", "etcdpeers", "testdata", "one-member.db"))
			if err != nil {
				t.Fatal(err)
			}
			write(t, dir, db, string(b))
		}, Pass, "1 members (kind-control-plane): a single member"},
		{"worker", "net-ip-change", nil, Pass, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := runTree(t, host(t, tc.host, tc.change))
			r, ok := rowNamed(rep.Rows, "etcd-peers")
			if tc.obs == "" {
				if ok {
					t.Fatalf("a node without etcd data has an etcd-peers row: %+v", r)
				}
				return
			}
			if !ok {
				t.Fatal("no etcd-peers row")
			}
			if r.Status != tc.want || !strings.Contains(r.Observed, tc.obs) {
				t.Errorf("row %+v, want %v with %q", r, tc.want, tc.obs)
			}
		})
	}
}

// TestEtcdPeersRowAgreesWithPlan: on every golden host, and on the HA
// control plane with memberships the plan does not redirect, the
// etcd-peers row says the unit redirects the peers exactly when the plan
// installs kind-etcd-peer-nat.service, a row that passes otherwise is a
// single member's, and the row repeats each warning the plan gives about
// etcd's peers. (The row once passed on a membership with no member named
// as this node, where the plan warned and installed nothing.)
func TestEtcdPeersRowAgreesWithPlan(t *testing.T) {
	const db = "var/lib/etcd/member/snap/db"
	members := func(ms ...etcdpeers.Member) func(string) {
		return func(dir string) { write(t, dir, db, string(etcdpeers.MembersDB(ms))) }
	}
	self := etcdpeers.Member{ID: 1, Name: "kind-control-plane", PeerURLs: []string{"https://172.18.0.3:2380"}}
	peer := etcdpeers.Member{ID: 2, Name: "kind-control-plane2", PeerURLs: []string{"https://172.18.0.5:2380"}}
	unnamed := etcdpeers.Member{ID: 3, PeerURLs: []string{"https://172.18.0.4:2380"}}
	hosts := map[string]func(string){}
	for _, name := range hosttest.Hosts(t) {
		hosts[name] = nil
	}
	for name, change := range map[string]func(string){
		"not-a-member":  members(peer, etcdpeers.Member{ID: 4, Name: "kind-control-plane3", PeerURLs: []string{"https://172.18.0.4:2380"}}),
		"unnamed-peers": members(self, unnamed),
		"one-unnamed":   members(self, peer, unnamed),
		"single":        members(self),
		"corrupt":       func(dir string) { write(t, dir, db, "not bbolt") },
	} {
		hosts["net-ha-restart/"+name] = change
	}
	for name, change := range hosts {
		t.Run(name, func(t *testing.T) {
			rep := runTree(t, host(t, strings.Split(name, "/")[0], change))
			installs := false
			var warnings []string
			for _, r := range rep.Dry.Results {
				for _, a := range r.Actions {
					installs = installs || (a.Op == plan.OpWrite && a.Path == etcdpeers.UnitPath)
					if a.Op == plan.OpLog && a.Level == logline.Warn && strings.Contains(string(a.Data), "etcd's peers") {
						warnings = append(warnings, string(a.Data))
					}
				}
			}
			r, ok := rowNamed(rep.Rows, "etcd-peers")
			if !ok {
				if installs || len(warnings) > 0 {
					t.Fatalf("no etcd-peers row; the plan installs %s: %t, warns %q", etcdpeers.UnitName, installs, warnings)
				}
				return
			}
			redirects := r.Status == Pass && strings.Contains(r.Observed, etcdpeers.UnitName+" redirects")
			if redirects != installs {
				t.Errorf("row %+v says the unit redirects: %t; the plan installs %s: %t", r, redirects, etcdpeers.UnitName, installs)
			}
			if r.Status == Pass && !installs && !strings.Contains(r.Observed, "a single member") {
				t.Errorf("row %+v passes, but the plan installs no %s", r, etcdpeers.UnitName)
			}
			for _, w := range warnings {
				if r.Status != Warn || !strings.Contains(r.Observed, strings.TrimPrefix(w, "not redirecting etcd's peers after a restart: ")) {
					t.Errorf("row %+v; the plan warns %q", r, w)
				}
			}
		})
	}
}
