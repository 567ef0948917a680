package etcdpeers

import (
	"context"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

const manifest = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - command:\n    - etcd\n    - --data-dir=/var/lib/etcd\n"

func rendered(actions []plan.Action) []string {
	var out []string
	for _, a := range actions {
		out = append(out, a.String())
	}
	return out
}

// TestDetectAndPlan: fake data directories, each planned.
func TestDetectAndPlan(t *testing.T) {
	db := "var/lib/etcd/member/snap/db"
	three := string(fixture(t, "three-members"))
	for _, tc := range []struct {
		name  string
		files map[string]string
		limit int
		// want are the rendered actions' prefixes; errPart what the
		// WARN must say.
		want    []string
		errPart string
	}{
		{name: "worker", files: map[string]string{"etc/hostname": "x\n"}},
		{name: "before kubeadm", files: map[string]string{"etc/kubernetes/manifests/etcd.yaml": manifest}},
		{name: "one member", files: map[string]string{"etc/kubernetes/manifests/etcd.yaml": manifest, db: string(fixture(t, "one-member"))}},
		{name: "three members", files: map[string]string{"etc/kubernetes/manifests/etcd.yaml": manifest, db: three}, want: []string{
			"log INFO: etcd has 3 members: kind-etcd-peer-nat.service will redirect connections to kind-control-plane2, kind-control-plane3",
			"write /run/kind-etcd-peers.json 0644",
			"mkdir /run/systemd/system/multi-user.target.wants 0755",
			"write /run/systemd/system/kind-etcd-peer-nat.service 0644",
			"symlink /run/systemd/system/multi-user.target.wants/kind-etcd-peer-nat.service -> ../kind-etcd-peer-nat.service",
		}},
		{name: "learner and unnamed", files: map[string]string{"etc/kubernetes/manifests/etcd.yaml": manifest, db: string(fixture(t, "learner"))}, want: []string{
			"log INFO: etcd member (unnamed 9d4e3f2a1b0c0d44) (https://172.18.0.7:2380) has no name",
			"log INFO: etcd has 4 members: kind-etcd-peer-nat.service will redirect connections to kind-control-plane2, kind-control-plane3",
			"write /run/kind-etcd-peers.json", "mkdir", "write /run/systemd", "symlink",
		}},
		{name: "data dir elsewhere", files: map[string]string{
			"etc/kubernetes/manifests/etcd.yaml": strings.Replace(manifest, "/var/lib/etcd", "/data/etcd", 1),
			"data/etcd/member/snap/db":           three,
		}, want: []string{"log INFO: etcd has 3", "write", "mkdir", "write", "symlink"}},
		{name: "data dir quoted", files: map[string]string{
			"etc/kubernetes/manifests/etcd.yaml": strings.Replace(manifest, "--data-dir=/var/lib/etcd", `"--data-dir=/var/lib/etcd-data"`, 1),
			"var/lib/etcd-data/member/snap/db":   three,
		}, want: []string{"log INFO: etcd has 3", "write", "mkdir", "write", "symlink"}},
		{name: "data dir unreadable", files: map[string]string{
			"etc/kubernetes/manifests/etcd.yaml": strings.Replace(manifest, "--data-dir=/var/lib/etcd", `"--data-dir=/var/lib/etcd-data`, 1),
			db:                                   three,
		}, want: []string{"log WARN: not redirecting etcd's peers after a restart: /etc/kubernetes/manifests/etcd.yaml: line 7"}, errPart: "not a YAML scalar"},
		{name: "manifest unreadable", files: map[string]string{"etc/kubernetes/manifests/etcd.yaml": strings.Repeat("x", system.LimitConfig+1)},
			want: []string{"log WARN: not redirecting"}, errPart: "limit"},
		{name: "empty file", files: map[string]string{"etc/kubernetes/manifests/etcd.yaml": manifest, db: ""},
			want: []string{"log WARN: not redirecting etcd's peers after a restart"}, errPart: "empty file"},
		{name: "corrupt file", files: map[string]string{"etc/kubernetes/manifests/etcd.yaml": manifest, db: strings.Repeat("x", 9000)},
			want: []string{"log WARN: not redirecting"}, errPart: "no valid meta page"},
		// The limit is on the bytes read, not on the file's size: a
		// file far larger than it is read by the pages that hold the
		// membership; a walk that needs more than it stops.
		{name: "larger than the limit", limit: 64 << 10, files: map[string]string{"etc/kubernetes/manifests/etcd.yaml": manifest, db: three + strings.Repeat("\x00", 1<<20)},
			want: []string{"log INFO: etcd has 3", "write", "mkdir", "write", "symlink"}},
		{name: "reading past the limit", limit: 4096, files: map[string]string{"etc/kubernetes/manifests/etcd.yaml": manifest, db: three},
			want: []string{"log WARN: not redirecting"}, errPart: "reading more than the 4096-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := hosttest.Tree(t, tc.files)
			limit := tc.limit
			if limit == 0 {
				limit = LimitDB
			}
			f := detect(tree, "kind-control-plane", limit)
			got := rendered(Plan(f, "nft", plan.DefaultExecutable))
			if len(got) != len(tc.want) {
				t.Fatalf("plan:\n%s\nwant %d actions", strings.Join(got, "\n"), len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("action %d: %q, want it to start %q", i, got[i], w)
				}
			}
			if tc.errPart != "" && (f.Err == nil || !strings.Contains(f.Err.Error(), tc.errPart)) {
				t.Errorf("error %v, want it to say %q", f.Err, tc.errPart)
			}
		})
	}
}

// TestPlanConverges: applied, the plan is planned away; the peers file
// holds what the command reads back.
func TestPlanConverges(t *testing.T) {
	tree := hosttest.Tree(t, map[string]string{
		"etc/kubernetes/manifests/etcd.yaml": manifest,
		"var/lib/etcd/member/snap/db":        string(fixture(t, "three-members")),
		"run/.keep":                          "",
	})
	apply(t, tree, Plan(Detect(tree, "kind-control-plane"), "legacy", "/entrypoint"))
	if again := Plan(Detect(tree, "kind-control-plane"), "legacy", "/entrypoint"); !plan.Converged(again) {
		t.Errorf("planned again:\n%s", strings.Join(rendered(again), "\n"))
	}
	cfg, err := ReadConfig(tree)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Iptables: "legacy", Self: "kind-control-plane", Peers: []Peer{
		{Name: "kind-control-plane2", PeerURLs: []string{"https://172.18.0.5:2380"}},
		{Name: "kind-control-plane3", PeerURLs: []string{"https://172.18.0.4:2380"}},
	}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("peers file (-want +got):\n%s", diff)
	}
	unit, err := tree.ReadFile(UnitPath, system.LimitConfig)
	if err != nil || !strings.Contains(string(unit), "ExecStart=/entrypoint etcd-peer-nat\n") || strings.Contains(string(unit), "Before=") {
		t.Errorf("unit %q (%v): want ExecStart of /entrypoint and no Before=", unit, err)
	}
	if fi, err := tree.Lstat(Unit(plan.DefaultExecutable).WantsLink()); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("wants link: %v", err)
	}
}

// TestNotThisNode: a membership that does not name this node installs
// nothing (its peers might include this node under another name).
func TestNotThisNode(t *testing.T) {
	f := Facts{Hostname: "other", DB: "/db", Present: true, Members: three}
	got := rendered(Plan(f, "nft", plan.DefaultExecutable))
	if len(got) != 1 || !strings.HasPrefix(got[0], "log WARN: not redirecting etcd's peers after a restart: no member of /db is named \"other\"") {
		t.Errorf("plan %q", got)
	}
}

func hostTree(t testing.TB, files map[string]string) *system.Tree { return hosttest.Tree(t, files) }

// apply applies actions to a fake tree.
func apply(t *testing.T, tree *system.Tree, actions []plan.Action) {
	t.Helper()
	if err := plan.Apply(context.Background(), tree, logline.New(io.Discard, logline.Text), actions, false); err != nil {
		t.Fatal(err)
	}
}
