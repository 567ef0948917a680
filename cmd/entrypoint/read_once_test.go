package main

import (
	"context"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/check"
	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// maxDBBytes is the most a command may read of etcd's database of
// 128 MiB: the meta pages and the trees of the root and membership
// buckets, a few pages on these hosts.
const maxDBBytes = 256 << 10

// TestReadsEtcdDatabaseOnce: each command that reads etcd's database
// (the dry run, check, capture) reads it once per run, by pages: one
// Open, no ReadFile (one reading, Reads.Readings), and of a file of
// 128 MiB (sparse: its pages past the fixture's are holes) at most
// maxDBBytes. The plan, check's rows and the archive all come from that
// one reading (boot.State.Peers). Every golden host with a database is
// run, the torn and forged ones too: an unreadable membership is read
// once as well.
func TestReadsEtcdDatabaseOnce(t *testing.T) {
	commands := map[string]func(sys system.System, env func(string) (string, bool), dir string) int{
		"dry-run": func(sys system.System, env func(string) (string, bool), _ string) int {
			d := boot.DryRunOn(context.Background(), sys, env, boot.Steps(), boot.DryRunOptions{})
			return printDryRun(io.Discard, io.Discard, logline.New(io.Discard, logline.Text), logline.Text, d, 1)
		},
		"check": func(sys system.System, env func(string) (string, bool), _ string) int {
			return checkHost(check.Options{Sys: sys, LookupEnv: env}, true, io.Discard, io.Discard)
		},
		"capture": func(sys system.System, env func(string) (string, bool), dir string) int {
			if code := captureHost(sys, env, false, filepath.Join(dir, "c.tar.gz"), io.Discard, io.Discard); code != 0 {
				t.Errorf("capture exited %d", code)
			}
			return 0
		},
	}
	hosts := 0
	for _, name := range hosttest.Hosts(t) {
		root := hosttest.Host(t, name)
		tree := system.NewTree(root)
		env, err := tree.Environ()
		if err != nil {
			t.Fatal(err)
		}
		db := backendIn(t, root)
		if db == "" {
			continue
		}
		hosts++
		if err := os.Truncate(filepath.Join(root, db), 128<<20); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range slices.Sorted(maps.Keys(commands)) {
			t.Run(name+"/"+cmd, func(t *testing.T) {
				sys := hosttest.NewCounting(tree)
				commands[cmd](sys, env, t.TempDir())
				r := sys.Reads(db)
				if r.Readings() != 1 || r.Whole != 0 {
					t.Errorf("%s: %+v, want one Open read by pages, no ReadFile", db, r)
				}
				if r.Bytes > maxDBBytes {
					t.Errorf("%s: %d bytes read, want at most %d", db, r.Bytes, maxDBBytes)
				}
				t.Logf("%s: %+v", db, r)
			})
		}
	}
	if hosts < 5 {
		t.Fatalf("%d golden hosts hold an etcd database, want at least the 5 of testdata/hosts", hosts)
	}
}

// backendIn is the node path of the etcd database under root, "" when
// there is none.
func backendIn(t *testing.T, root string) string {
	var db string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && etcdpeers.IsBackend(p) {
			db = strings.TrimPrefix(p, root)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}
