package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
