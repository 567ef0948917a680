package boot

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// TestRefusesV1Line: on cgroup v1, an image whose kubelet refuses it
// (/kind/version 1.35+) has fix_cgroup warn right after "detected cgroup
// v1", which stays first, also when the step then fails; any other
// version, or a version that cannot be read, changes nothing of the plan.
func TestRefusesV1Line(t *testing.T) {
	const detected = "log INFO: detected cgroup v1"
	for _, tt := range []struct {
		name, version, selfCgroup string
		want                      []string // fix_cgroup's first actions
		fails                     bool
	}{
		{name: "1.35", version: "v1.35.0\n", want: []string{detected, "log WARN: the kubelet of this image (v1.35.0, from /kind/version) refuses cgroup v1"}},
		{name: "1.35, the step failing", version: "v1.35.0\n", selfCgroup: "0::/\n", fails: true,
			want: []string{detected, "log WARN: the kubelet of this image (v1.35.0, from /kind/version) refuses cgroup v1"}},
		{name: "1.34", version: "v1.34.0\n", want: []string{detected, "log INFO: detected cgroupns"}},
		{name: "garbage", version: "v1.35.x\n", want: []string{detected, "log INFO: detected cgroupns"}},
		{name: "garbage, the step failing", version: "\xff", selfCgroup: "0::/\n", fails: true, want: []string{detected}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tree := copyRoot(t, scenario{"docker-v1-cgroupns", filepath.Join(hostsDir, "docker-v1-cgroupns")})
			files := hosttest.Files(t, tree)
			if err := files.WriteFile("/kind/version", []byte(tt.version), 0o644); err != nil {
				t.Fatal(err)
			}
			if tt.selfCgroup != "" {
				if err := files.WriteFile("/proc/self/cgroup", []byte(tt.selfCgroup), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			results, err := DryRun(context.Background(), detect(t, tree), Steps())
			if (err != nil) != tt.fails {
				t.Fatalf("dry run: %v, want failing: %v", err, tt.fails)
			}
			var actions []string
			for _, r := range results {
				if r.Step == "fix_cgroup" {
					for _, a := range r.Actions {
						actions = append(actions, a.String())
					}
				}
			}
			if tt.fails && len(actions) != len(tt.want) {
				t.Errorf("fix_cgroup plans %q before failing, want %d actions", actions, len(tt.want))
			}
			for i, w := range tt.want {
				if i >= len(actions) || !strings.HasPrefix(actions[i], w) {
					t.Fatalf("fix_cgroup plans %q, want %q first", actions, tt.want)
				}
			}
		})
	}
}
