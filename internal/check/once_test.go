package check

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// TestDetectsOnce: check builds its rows from its one dry run; it never
// detects again what a step detected. No memo stands between check and
// the host here (hosttest.Counting), so a second read of the mount table
// or of etcd's database, or a second run of an iptables save (the probes
// every row used to repeat) is counted.
func TestDetectsOnce(t *testing.T) {
	for _, name := range []string{
		"docker-v1-no-cgroupns",        // fix_cgroup and the identity steps read the table too
		"docker-v2-cgroupns",           //
		"rootless-v2-missing-cpu-pids", // step 1 fatal: every later step still planned, once
		"net-legacy-wins",              // both backends hold rules
		"net-ha-restart",               // etcd's membership: the plan and the etcd-peers row
	} {
		t.Run(name, func(t *testing.T) {
			tree := system.NewTree(host(t, name, nil))
			env, _ := tree.Environ()
			sys := hosttest.NewCounting(tree)
			rep := Run(context.Background(), Options{Sys: sys, LookupEnv: env, ProbeTimeout: 100 * time.Millisecond})
			if _, ok := rowNamed(rep.Rows, "iptables-mode"); !ok {
				t.Fatalf("no iptables-mode row: %v", rep.Rows)
			}
			if n := sys.Reads(system.MountinfoPath).Readings(); n != 1 {
				t.Errorf("%s read %d times, want once", system.MountinfoPath, n)
			}
			for p, r := range sys.Paths() {
				if n := r.Readings(); etcdpeers.IsBackend(p) && n != 1 {
					t.Errorf("%s read %d times, want once", p, n)
				}
			}
			if _, ok := rowNamed(rep.Rows, "etcd-peers"); ok != (name == "net-ha-restart") {
				t.Errorf("etcd-peers row: %t, want it only on the control plane with etcd data", ok)
			}
			saves := map[string]int{}
			for _, argv := range tree.Ran() {
				if name := path.Base(argv[0]); strings.HasSuffix(name, "-save") {
					saves[name]++
				}
			}
			if len(saves) == 0 {
				t.Error("no iptables save ran")
			}
			for save, n := range saves {
				if n != 1 {
					t.Errorf("%s ran %d times, want once", save, n)
				}
			}
		})
	}
}
