package boot

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// TestRuntimeUnitsRunTheBinary: both runtime units run the binary that
// boots (Host.Executable), wherever the image has it (here only at
// /entrypoint, as an image with `ENTRYPOINT ["/entrypoint", ...]`), and
// the default path in a dry run that does not know it.
func TestRuntimeUnitsRunTheBinary(t *testing.T) {
	for _, tt := range []struct{ host, unit, command string }{
		{"net-ipv6-forwarder", network.ForwarderUnitName, network.ForwarderCommand},
		{"net-ha-restart", etcdpeers.UnitName, etcdpeers.Command},
	} {
		for _, exe := range []string{"", "/entrypoint"} {
			h := detect(t, copyRoot(t, scenario{tt.host, filepath.Join(hostsDir, tt.host)}))
			h.Executable = exe
			results, err := DryRun(t.Context(), h, Steps())
			if err != nil {
				t.Fatalf("%s: %v", tt.host, err)
			}
			want := "\nExecStart=" + h.executable() + " " + tt.command
			if exe == "" && h.executable() != plan.DefaultExecutable {
				t.Errorf("no executable: units run %s, want %s", h.executable(), plan.DefaultExecutable)
			}
			var unit []byte
			for _, r := range results {
				for _, a := range r.Actions {
					if a.Op == plan.OpWrite && a.Path == plan.RuntimeUnitDir+"/"+tt.unit {
						unit = a.Data
					}
				}
			}
			if !strings.Contains(string(unit), want) {
				t.Errorf("%s, executable %q: unit %q, want %q in it", tt.host, exe, unit, want)
			}
		}
	}
}
