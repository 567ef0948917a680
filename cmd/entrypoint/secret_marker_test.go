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
			dry, a := noMarker(t, root)
			if !strings.Contains(dry, "WARN: not redirecting etcd's peers after a restart: /var/lib/etcd/member/snap/db: ") {
				t.Errorf("no WARN naming the database:\n%.2000s", dry)
			}
			if !strings.Contains(a, "etcd database, NOT ARCHIVED (its membership is unreadable: ") {
				t.Error("the capture's manifest does not say why the database was left out")
			}
		})
	}
}

// noMarker runs every command that reads a --root on root, --dry-run
// and check in text and JSON, and capture: the marker must be in no
// output and no archived file. It returns the text dry run's output and
// the archive's names and contents.
func noMarker(t *testing.T, root string) (dry, archive string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "node.tar.gz")
	for _, args := range [][]string{
		{"--dry-run", "--root", root},
		{"--log-format=json", "--dry-run", "--root", root},
		{"check", "--root", root},
		{"check", "--json", "--root", root},
		{"capture", "-o", path, "--root", root},
	} {
		var stdout, stderr bytes.Buffer
		code := dispatch("entrypoint", args, strings.NewReader(""), &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if strings.Contains(out, marker) {
			t.Errorf("%q (exit %d) shows the marker:\n%s", args, code, out)
		}
		if args[0] == "--dry-run" {
			dry = out
		}
	}
	archive = archived(t, path)
	if strings.Contains(archive, marker) {
		t.Error("the capture holds the marker")
	}
	return dry, archive
}

// TestSecretInputsNeverQuoted: the marker in each other input that can
// hold a secret (private keys, kubeconfigs, a proxy password in the
// environment), on hosts whose plan rewrites or copies it: no command
// shows it, however short the file (a plan quotes a write of up to 200
// bytes), and a proxy value the drop-in refuses is refused without it.
func TestSecretInputsNeverQuoted(t *testing.T) {
	key := "-----BEGIN EC PRIVATE KEY-----\n" + marker + "\n-----END EC PRIVATE KEY-----\n"
	kubeconfig := func(server string) string {
		return "apiVersion: v1\nclusters:\n- cluster:\n    server: " + server + "\n  name: kind\nusers:\n- name: u\n  user:\n    client-key-data: " + marker + "\n"
	}
	environ := func(t *testing.T, root, proxy string) {
		p := filepath.Join(root, ".host", "environ")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		old := "http://CORP\\svc-kind:p%40ss$w0rd@proxy.corp.example.com:3128"
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%s holds no %s", p, old)
		}
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte(old), []byte(proxy)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, host string
		files      map[string]string
		proxy      string
		dryWants   string
	}{
		{"keys-and-kubeconfigs", "net-ip-change", map[string]string{
			"etc/kubernetes/pki/apiserver.key":       key,
			"etc/kubernetes/pki/ca.key":              key,
			"etc/kubernetes/kubelet.conf":            kubeconfig("https://172.18.0.3:6443"),
			"etc/kubernetes/controller-manager.conf": kubeconfig("https://172.18.0.3:6443"),
			"etc/kubernetes/scheduler.conf":          kubeconfig("https://kind-control-plane:6443"),
		}, "", "write /etc/kubernetes/pki/apiserver.key.old 0600 ("},
		{"key-not-pem", "net-ha-restart", map[string]string{"etc/kubernetes/pki/apiserver.key": marker}, "", "write /etc/kubernetes/pki/apiserver.key.old 0600 ("},
		{"proxy-password", "corporate-proxy", nil, "http://svc-kind:" + marker + "@proxy.corp.example.com:3128", "proxy-default-environment.conf 0644 ("},
		{"proxy-password-short", "corporate-proxy", nil, "http://u:" + marker + "@p:1", "a secret: not shown"},
		{"proxy-control-character", "corporate-proxy", nil, "http://u:" + marker + "\x01@p:1", "control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := hosttest.Host(t, tc.host)
			for p, content := range tc.files {
				if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.proxy != "" {
				environ(t, root, tc.proxy)
			}
			if dry, _ := noMarker(t, root); !strings.Contains(dry, tc.dryWants) {
				t.Errorf("the dry run does not say %q:\n%.3000s", tc.dryWants, dry)
			}
		})
	}
}

// TestContainerdCredentialsNeverQuoted: the marker as a registry's auth
// password in containerd's config.toml, on a rootless host whose plan
// rewrites the config: no command shows it, whether the config is read
// and rewritten (the plan shows it masked, capture archives it masked)
// or broken around the password in each way the reader reports (the
// error names the file, line and column; capture archives it empty).
func TestContainerdCredentialsNeverQuoted(t *testing.T) {
	const auth = `[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example".auth]` + "\n"
	for _, tc := range []struct {
		name, config string
		replace      bool // config replaces the host's, else is appended to it
		dryWants     string
		archiveWants string
	}{
		{"auth-password", auth + "username = \"u\"\npassword = \"" + marker + "\"\n", false, "(secrets masked)", "credential values (registry auth, headers) redacted"},
		{"short-config", "version = 2\n" + auth + "password = \"" + marker + "\"\n", true, `\"(redacted)\"`, "credential values (registry auth, headers) redacted"},
		{"inline-auth", "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"r\"]\nauth = { password = \"" + marker + "\" }\n", false, "(secrets masked)", "redacted"},
		{"commented-out", auth + "username = \"u\"\n# password = \"" + marker + "\"\n", false, "(secrets masked)", "credential values (registry auth, headers) redacted"},
		{"unquoted", auth + "password = " + marker + "\n", false, "/etc/containerd/config.toml: line ", "NOT ARCHIVED: it does not parse"},
		{"bad-escape", auth + "password = \"\\" + marker + "\"\n", false, "/etc/containerd/config.toml: line ", "NOT ARCHIVED: it does not parse"},
		{"newline-in-string", auth + "password = \"" + marker + "\nx\"\n", false, "/etc/containerd/config.toml: line ", "NOT ARCHIVED: it does not parse"},
		{"unterminated", auth + "password = \"" + marker, false, "/etc/containerd/config.toml: line ", "NOT ARCHIVED: it does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := hosttest.Host(t, "rootless-v2-delegated")
			p := filepath.Join(root, "etc/containerd/config.toml")
			old, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			config := string(old) + tc.config
			if tc.replace {
				config = tc.config
			}
			if err := os.WriteFile(p, []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
			dry, archive := noMarker(t, root)
			if !strings.Contains(dry, tc.dryWants) {
				t.Errorf("the dry run does not say %q:\n%.3000s", tc.dryWants, dry)
			}
			if !strings.Contains(archive, tc.archiveWants) {
				t.Errorf("the capture's manifest does not say %q", tc.archiveWants)
			}
		})
	}
}
