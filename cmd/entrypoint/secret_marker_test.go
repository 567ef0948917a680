package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// marker is what internal/etcdpeers/testdata/secret's databases hold
// where a Secret would be (etcdpeers.Marker).
const marker = "SECRET-MARKER-7f3a"

// TestSecretsNeverQuoted: an HA control plane whose etcd database is
// broken in each way the reader reports (internal/etcdpeers'
// TestSecretNeverQuoted writes them, each holding the marker in its key
// bucket, in stale pages and in the bytes it damages), run through
// every command that reads a --root: the marker is in no output, text
// or JSON, and in no file of the capture, whose own files (.host/CAPTURE,
// .host/plan, .host/check.json) quote the error.
func TestSecretsNeverQuoted(t *testing.T) {
	dbs, err := filepath.Glob(filepath.Join("..", "..", "internal", "etcdpeers", "testdata", "secret", "*.db"))
	if err != nil || len(dbs) < 10 {
		t.Fatalf("the broken databases: %d, %v", len(dbs), err)
	}
	for _, db := range dbs {
		data, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(marker)) {
			t.Fatalf("%s holds no marker", db)
		}
		t.Run(strings.TrimSuffix(filepath.Base(db), ".db"), func(t *testing.T) {
			root := hosttest.Host(t, "net-ha-restart")
			if err := os.WriteFile(filepath.Join(root, "var/lib/etcd/member/snap/db"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			archive := filepath.Join(t.TempDir(), "node.tar.gz")
			for _, args := range [][]string{
				{"--dry-run", "--root", root},
				{"--log-format=json", "--dry-run", "--root", root},
				{"check", "--root", root},
				{"check", "--json", "--root", root},
				{"capture", "-o", archive, "--root", root},
			} {
				var stdout, stderr bytes.Buffer
				code := dispatch("entrypoint", args, strings.NewReader(""), &stdout, &stderr)
				out := stdout.String() + stderr.String()
				if strings.Contains(out, marker) {
					t.Errorf("%q (exit %d) shows the marker:\n%s", args, code, out)
				}
				if args[0] == "--dry-run" && !strings.Contains(out, "WARN: not redirecting etcd's peers after a restart: /var/lib/etcd/member/snap/db: ") {
					t.Errorf("%q: no WARN naming the database:\n%.2000s", args, out)
				}
			}
			a := archived(t, archive)
			if strings.Contains(a, marker) {
				t.Error("the capture holds the marker")
			}
			if !strings.Contains(a, "etcd database, NOT ARCHIVED (its membership is unreadable: ") {
				t.Error("the capture's manifest does not say why the database was left out")
			}
		})
	}
}
