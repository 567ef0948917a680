package capture

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
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
	want, err := etcdpeers.ReadMembersAt(bytes.NewReader(orig), int64(len(orig)))
	if err != nil {
		t.Fatal(err)
	}
	members, err := etcdpeers.ReadMembersAt(bytes.NewReader(got.data), int64(len(got.data)))
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

// BenchmarkCaptureEtcd128MiB: the dry run and the archive of a control
// plane whose etcd database is 128 MiB (the size the whole file used to
// be read up to, several times): the database is read by pages, so the
// cost is that of a small one (issue 53, class 4).
func BenchmarkCaptureEtcd128MiB(b *testing.B) {
	src := hosttest.Host(b, "net-ha-restart")
	hosttest.AddFiles(b, src, map[string]string{system.ProbeDir + "/random": "kind"})
	db, err := os.OpenFile(filepath.Join(src, "var/lib/etcd/member/snap/db"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	fi, err := db.Stat()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Write(make([]byte, 128<<20-fi.Size())); err != nil {
		b.Fatal(err)
	}
	db.Close()
	tree := system.NewTree(src)
	env, _ := tree.Environ()
	b.ReportAllocs()
	for b.Loop() {
		rec := NewRecorder(tree)
		dry := boot.DryRunOn(context.Background(), rec, rec.Env(env), boot.Steps(), boot.DryRunOptions{ProbeTimeout: testProbeTimeout})
		render, _ := Plan(dry)
		if _, err := Archive(io.Discard, rec, Options{Time: time.Unix(1700000000, 0), Streams: map[string]func(io.Writer) error{"plan": render}, State: dry.State()}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEtcdDatabaseWithoutState: an archive given no membership of the
// run (Options.State nil) does not read the database again to find one:
// it is archived empty, and the manifest says why.
func TestEtcdDatabaseWithoutState(t *testing.T) {
	tree := system.NewTree(copyHost(t, "net-ha-restart"))
	env, _ := tree.Environ()
	rec := NewRecorder(tree)
	boot.DryRunOn(context.Background(), rec, rec.Env(env), boot.Steps(), boot.DryRunOptions{ProbeTimeout: testProbeTimeout})
	counted := hosttest.NewCounting(tree)
	rec.sys = counted
	var buf bytes.Buffer
	items, err := Archive(&buf, rec, Options{Time: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	const db = "/var/lib/etcd/member/snap/db"
	if r := counted.Reads(db); r.Readings() != 0 {
		t.Errorf("the archive read %s: %+v", db, r)
	}
	if e, ok := readArchive(t, buf.Bytes())[db]; !ok || len(e.data) != 0 {
		t.Errorf("%s archived as %d bytes (present: %t), want an empty file", db, len(e.data), ok)
	}
	if !slices.ContainsFunc(items, func(it Item) bool {
		return it.Path == db && strings.Contains(it.What, "recorded no membership")
	}) {
		t.Errorf("the manifest does not say why the database is empty: %v", items)
	}
}
