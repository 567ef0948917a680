package check

import (
	"context"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// counting is a host that counts the reads of its mount table; the Tree
// under it logs every command run (Ran).
type counting struct {
	system.System
	mu        sync.Mutex
	mountinfo int
}

func (c *counting) ReadFile(p string, limit int) ([]byte, error) {
	if p == system.MountinfoPath {
		c.mu.Lock()
		c.mountinfo++
		c.mu.Unlock()
	}
	return c.System.ReadFile(p, limit)
}

// TestDetectsOnce: check builds its rows from its one dry run; it never
// detects again what a step detected. No memo stands between check and
// the host here, so a second read of the mount table or a second run of
// an iptables save (the probes every row used to repeat) is counted.
func TestDetectsOnce(t *testing.T) {
	for _, name := range []string{
		"docker-v1-no-cgroupns",        // fix_cgroup and the identity steps read the table too
		"docker-v2-cgroupns",           //
		"rootless-v2-missing-cpu-pids", // step 1 fatal: every later step still planned, once
		"net-legacy-wins",              // both backends hold rules
	} {
		t.Run(name, func(t *testing.T) {
			tree := system.NewTree(host(t, name, nil))
			env, _ := tree.Environ()
			sys := &counting{System: tree}
			rep := Run(context.Background(), Options{Sys: sys, LookupEnv: env, ProbeTimeout: 100 * time.Millisecond})
			if _, ok := rowNamed(rep.Rows, "iptables-mode"); !ok {
				t.Fatalf("no iptables-mode row: %v", rep.Rows)
			}
			if sys.mountinfo != 1 {
				t.Errorf("%s read %d times, want once", system.MountinfoPath, sys.mountinfo)
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
