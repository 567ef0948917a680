package capture

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// TestEtcdDatabase: etcd's database (it holds the cluster's Secrets) is
// never archived, and never read whole (step 10 and capture read it by
// pages); a file of its membership stands in for it, which a
// replay reads the same way (TestReplayHosts replays the plan).
func TestEtcdDatabase(t *testing.T) {
	src := copyHost(t, "net-ha-restart")
	tree := system.NewTree(src)
	env, _ := tree.Environ()
	_, rec, archive, items, _ := captureTree(t, tree, env)
	const db = "/var/lib/etcd/member/snap/db"
	if a := rec.Paths()[db]; a&Pages == 0 || a&Read != 0 {
		t.Fatalf("the dry run read %s as %q, want by pages only", db, a)
	}
	orig, err := os.ReadFile(filepath.Join(src, db))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(orig, []byte("/registry/")) {
		t.Fatal("the fixture holds no keys: the test needs one that does")
	}
	entries := readArchive(t, archive)
	got, ok := entries[db]
	if !ok {
		t.Fatalf("%s is not in the archive", db)
	}
	for name, e := range entries {
		if bytes.Contains(e.data, []byte("/registry/")) {
			t.Errorf("%s holds etcd's keys", name)
		}
	}
	want, err := etcdpeers.ReadMembers(orig)
	if err != nil {
		t.Fatal(err)
	}
	members, err := etcdpeers.ReadMembers(got.data)
	if err != nil {
		t.Fatalf("archived %s: %v", db, err)
	}
	if diff := cmp.Diff(want, members); diff != "" {
		t.Errorf("archived membership (-want +got):\n%s", diff)
	}
	if !slices.ContainsFunc(items, func(it Item) bool { return it.Path == db && strings.Contains(it.What, "NOT ARCHIVED") }) {
		t.Errorf("the manifest does not say the database was left out: %v", items)
	}
}
