package capture

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/proxy"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

// testProbeTimeout keeps the hanging probes of some hosts short.
var testProbeTimeout = nstest.Stretch(200 * time.Millisecond)

// copyHost copies a fake host to a temp dir, with a fixed random seed so
// that its plan draws the same identities every time.
func copyHost(t *testing.T, name string) string {
	t.Helper()
	dst := hosttest.Host(t, name)
	hosttest.AddFiles(t, dst, map[string]string{system.ProbeDir + "/random": "kind"})
	return dst
}

// replay plans a tree as `entrypoint --dry-run --root DIR` does.
func replay(t *testing.T, dir string) ([]byte, error) {
	t.Helper()
	tree := system.NewTree(dir)
	env, _ := tree.Environ()
	d := boot.DryRunOn(context.Background(), tree, env, boot.Steps(), boot.DryRunOptions{ProbeTimeout: testProbeTimeout})
	if d.DetectErr != nil {
		return nil, d.DetectErr
	}
	var b bytes.Buffer
	if rerr := d.Render(&b); rerr != nil {
		t.Fatal(rerr)
	}
	if len(tree.Changes()) > 0 {
		t.Fatalf("a dry run changed the tree: %q", tree.Changes())
	}
	return b.Bytes(), d.Err
}

// captureTree records a dry run of sys and archives it.
func captureTree(t *testing.T, sys system.System, env func(string) (string, bool)) (plan []byte, rec *Recorder, archive []byte, items []Item, planErr error) {
	t.Helper()
	rec = NewRecorder(sys)
	dry := boot.DryRunOn(context.Background(), rec, rec.Env(env), boot.Steps(), boot.DryRunOptions{ProbeTimeout: testProbeTimeout})
	render, planErr := Plan(dry)
	var text bytes.Buffer
	if err := render(&text); err != nil {
		t.Fatal(err)
	}
	plan = text.Bytes()
	var buf bytes.Buffer
	items, err := Archive(&buf, rec, Options{Time: time.Unix(1700000000, 0), Streams: map[string]func(io.Writer) error{"plan": render}, State: dry.State()})
	if err != nil {
		t.Fatal(err)
	}
	return plan, rec, buf.Bytes(), items, planErr
}

func extract(t *testing.T, archive []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := unpack(bytes.NewReader(archive), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

func readArchive(t *testing.T, archive []byte) map[string]tarEntry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]tarEntry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimSuffix(h.Name, "/")
		if _, dup := out[name]; dup {
			t.Errorf("%s is in the archive twice", name)
		}
		out[name] = tarEntry{h, data}
	}
}

// expectedDiff says which plan lines a replay may not reproduce: the
// content of private keys (never archived) and of the proxy drop-in (its
// credentials are redacted), and why an etcd database is unreadable (it
// is archived empty: the replay still finds it unreadable, as empty).
var expectedDiff = regexp.MustCompile(`apiserver\.key|proxy-default-environment\.conf|` +
	`fact etcd members: unreadable: /var/lib/etcd/member/snap/db: |WARN: not redirecting etcd's peers after a restart: /var/lib/etcd/member/snap/db: `)

// TestReplayHosts captures every fake host and replays the capture: the
// plan is the same, line for line, but for what is redacted.
func TestReplayHosts(t *testing.T) {
	for _, name := range hosttest.Hosts(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := copyHost(t, name)
			tree := system.NewTree(src)
			env, _ := tree.Environ()
			want, rec, archive, _, wantErr := captureTree(t, tree, env)
			if len(tree.Changes()) > 0 {
				t.Fatalf("capturing changed the host: %q", tree.Changes())
			}
			got, gotErr := replay(t, extract(t, archive))
			if (wantErr == nil) != (gotErr == nil) {
				t.Errorf("the node's dry run failed: %v; the replay: %v", wantErr, gotErr)
			}
			diff := nstest.DiffLines(string(want), string(got))
			for _, line := range strings.Split(strings.TrimSpace(diff), "\n") {
				if line != "" && !expectedDiff.MatchString(line) {
					t.Errorf("the replayed plan differs (-node +replay):\n%s", diff)
					break
				}
			}
			if diff != "" {
				t.Logf("expected differences (-node +replay):\n%s", diff)
			}
			requireExactly(t, src, rec, archive)
		})
	}
}

// requireExactly checks that the archive holds exactly what was read: every
// file or symlink in it is a path the dry run read (or where one of those
// leads through a symlink it read), every directory leads to one, and
// every path read that exists is there.
func requireExactly(t *testing.T, root string, rec *Recorder, archive []byte) {
	t.Helper()
	entries := readArchive(t, archive)
	read := rec.Paths()
	// Where each path read is, symlinks resolved within the tree.
	resolved := map[string]string{}
	for p := range read {
		real, err := filepath.EvalSymlinks(filepath.Join(root, p))
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(root, real)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		resolved["/"+filepath.ToSlash(rel)] = p
	}
	// Directories on the way to a path read are archived, whether that
	// path exists or not: /kind holding no product_uuid yet is a fact.
	leads := map[string]bool{}
	for p := range read {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			leads[d] = true
		}
	}
	for name, e := range entries {
		if name == "/"+system.ProbeDir || strings.HasPrefix(name, "/"+system.ProbeDir+"/") {
			continue
		}
		if e.hdr.Typeflag == tar.TypeDir {
			continue
		}
		_, isRead := read[name]
		_, leadsTo := resolved[name]
		if !isRead && !leadsTo {
			t.Errorf("%s is archived but was never read", name)
		}
		for d := path.Dir(name); d != "/"; d = path.Dir(d) {
			leads[d] = true
		}
		if e.hdr.Typeflag == tar.TypeSymlink {
			target := e.hdr.Linkname
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(name), target)
			}
			for d := target; d != "/"; d = path.Dir(d) {
				leads[d] = true
			}
		}
	}
	for name, e := range entries {
		if e.hdr.Typeflag != tar.TypeDir || strings.HasPrefix(name, "/"+system.ProbeDir) {
			continue
		}
		if _, isRead := read[name]; !isRead && !leads[name] {
			t.Errorf("directory %s is archived but leads to nothing read", name)
		}
	}
	for p := range read {
		if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
			continue // absent on the node: absent in the archive
		}
		real, _ := filepath.EvalSymlinks(filepath.Join(root, p))
		rel, _ := filepath.Rel(root, real)
		if _, ok := entries[p]; !ok {
			if _, ok := entries["/"+filepath.ToSlash(rel)]; !ok {
				t.Errorf("%s was read (%s) but is not archived", p, read[p])
			}
		}
	}
}

// TestPrivateKeys: on a control plane whose address changed, the dry run
// reads the API server's key; the archive has an empty file there, says so,
// and holds no key material anywhere.
func TestPrivateKeys(t *testing.T) {
	src := copyHost(t, "net-ip-change")
	tree := system.NewTree(src)
	env, _ := tree.Environ()
	_, rec, archive, items, _ := captureTree(t, tree, env)
	const key = "/etc/kubernetes/pki/apiserver.key"
	if rec.Paths()[key]&Read == 0 {
		t.Fatalf("the dry run did not read %s: the test needs a host where it does", key)
	}
	entries := readArchive(t, archive)
	e, ok := entries[key]
	if !ok {
		t.Fatalf("%s is not in the archive (its existence is a fact the plan uses)", key)
	}
	if e.hdr.Size != 0 || len(e.data) != 0 {
		t.Errorf("%s archived with %d bytes, want none", key, len(e.data))
	}
	orig, err := os.ReadFile(filepath.Join(src, key))
	if err != nil || len(orig) == 0 {
		t.Fatalf("the fake key: %v", err)
	}
	for name, e := range entries {
		if bytes.Contains(e.data, orig) || bytes.Contains(e.data, []byte("PRIVATE KEY-----")) {
			t.Errorf("%s holds key material", name)
		}
	}
	if !slices.ContainsFunc(items, func(it Item) bool { return it.Path == key && strings.Contains(it.What, "NOT ARCHIVED") }) {
		t.Errorf("the manifest does not say the key was left out: %v", items)
	}
	if !bytes.Contains(entries["/"+system.ProbeDir+"/"+ManifestFile].data, []byte(key+": PRIVATE KEY, NOT ARCHIVED")) {
		t.Errorf(".host/%s does not say the key was left out", ManifestFile)
	}
}

// TestProxyCredentials: what the node's environment and its proxy drop-in
// say of proxy passwords is redacted.
func TestProxyCredentials(t *testing.T) {
	src := copyHost(t, "corporate-proxy")
	// A booted node: the drop-in written with the credentials.
	content := "[Manager]\nDefaultEnvironment=\"HTTP_PROXY=http://CORP\\\\svc-kind:p%%40ss$w0rd@proxy.corp.example.com:3128\"\n"
	entries := captureWithDropIn(t, src, []byte(content))
	noneHolds(t, entries, "w0rd", "svc-kind")
	environ := string(entries["/"+system.ProbeDir+"/environ"].data)
	if !strings.Contains(environ, "HTTP_PROXY=http://REDACTED@proxy.corp.example.com:3128\n") ||
		!strings.Contains(environ, "http_proxy=http://REDACTED@proxy.corp.example.com:3128\n") {
		t.Errorf(".host/environ:\n%s", environ)
	}
	if got := string(entries["/etc/systemd/system.conf.d/proxy-default-environment.conf"].data); !strings.Contains(got, "http://REDACTED@proxy.corp.example.com:3128") {
		t.Errorf("the drop-in:\n%s", got)
	}
	// Only the variables read: nothing else of the environment.
	if strings.Contains(environ, "container=") || strings.Contains(environ, "HOSTNAME=") {
		t.Errorf(".host/environ holds variables the dry run never read:\n%s", environ)
	}
}

// captureWithDropIn captures the host at src with content as its proxy
// drop-in (a booted node's), and returns the archive's entries.
func captureWithDropIn(t *testing.T, src string, content []byte) map[string]tarEntry {
	t.Helper()
	tree := system.NewTree(src)
	w := hosttest.Files(t, tree)
	if err := w.MkdirAll(path.Dir(proxy.DropIn), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(proxy.DropIn, content, 0o644); err != nil {
		t.Fatal(err)
	}
	env, _ := tree.Environ()
	_, _, archive, _, _ := captureTree(t, tree, env)
	return readArchive(t, archive)
}

// noneHolds fails for each entry that holds one of the secrets.
func noneHolds(t *testing.T, entries map[string]tarEntry, secrets ...string) {
	t.Helper()
	for name, e := range entries {
		for _, s := range secrets {
			if bytes.Contains(e.data, []byte(s)) {
				t.Errorf("%s holds the proxy credentials (%q):\n%s", name, s, e.data)
			}
		}
	}
}

// TestProxyCredentialsAnyForm: a proxy password is redacted however the
// value is written: without a scheme (curl, Go and Docker take
// "user:pass@proxy:3128"), or with a quote, a blank or a slash in the
// password, which the URL pattern alone stopped at. Each is checked in
// .host/environ, in a drop-in written from the value (a booted node), in a
// drop-in from an earlier boot whose value the environment no longer
// holds, and in the plan, which shows the drop-in's content quoted.
func TestProxyCredentialsAnyForm(t *testing.T) {
	for _, value := range []string{
		"svc-kind:Secr3t@proxy.corp.example.com:3128",
		`http://svc-kind:Secr"3t@proxy.corp.example.com:3128`,
		"http://svc-kind:Secr'3t@proxy.corp.example.com:3128",
		"http://svc-kind:Secr 3t@proxy.corp.example.com:3128",
		"http://svc-kind:Se/cr3t@proxy.corp.example.com:3128",
		`http://svc-kind:Se\cr%3t@proxy.corp.example.com:3128`,
	} {
		t.Run(value, func(t *testing.T) {
			src := copyHost(t, "docker-v1-cgroupns")
			environ := filepath.Join(src, system.ProbeDir, "environ")
			old, err := os.ReadFile(environ)
			if err != nil {
				t.Fatal(err)
			}
			hosttest.AddFiles(t, src, map[string]string{system.ProbeDir + "/environ": string(old) + "HTTP_PROXY=" + value + "\n"})
			// The drop-in of an earlier boot, with another password
			// than the environment's.
			earlier := strings.ReplaceAll(value, "Secr", "Earlier")
			dropIn, err := proxy.Render([]proxy.Var{{Name: "HTTPS_PROXY", Value: earlier}})
			if err != nil {
				t.Fatal(err)
			}
			entries := captureWithDropIn(t, src, dropIn)
			noneHolds(t, entries, "cr3t", "svc-kind")
			if got := string(entries["/"+system.ProbeDir+"/environ"].data); !strings.Contains(got, "REDACTED@proxy.corp.example.com:3128\n") {
				t.Errorf(".host/environ does not say what was redacted:\n%s", got)
			}
		})
	}
}

// TestProxyCredentialStrings: proxyUserinfo finds the credentials in a
// proxy value, RedactURLCredentials replaces them.
func TestProxyCredentialStrings(t *testing.T) {
	type stringCase struct{ in, want string }
	for _, f := range []struct {
		name  string
		fn    func(string) string
		cases []stringCase
	}{
		{"proxyUserinfo", proxyUserinfo, []stringCase{
			{"http://user:pass@proxy:3128", "user:pass"},
			{"user:pass@proxy:3128", "user:pass"},
			{"http://proxy:3128", ""},
			{"proxy:3128", ""},
			{"https://u:p@ss@host/path@x", "u:p@ss"},
			{"http://u:p/w@proxy", "u:p/w"},
			{`http://u:p"w d@proxy`, `u:p"w d`},
			{"@proxy", ""},
			{"localhost,.svc", ""},
		}},
		{"RedactURLCredentials", RedactURLCredentials, []stringCase{
			{"http://user:pass@proxy:3128", "http://REDACTED@proxy:3128"},
			{"http://proxy:3128", "http://proxy:3128"},
			{`http://CORP\svc-kind:p%40ss$w0rd@proxy.corp.example.com:3128`, "http://REDACTED@proxy.corp.example.com:3128"},
			{"https://u:p@ss@host/path@x", "https://REDACTED@host/path@x"}, // an unencoded @ in the password
			{"socks5h://token@h", "socks5h://REDACTED@h"},
			{`"HTTP_PROXY=http://a:b@h:1" "HTTPS_PROXY=http://c:d@h:2"`, `"HTTP_PROXY=http://REDACTED@h:1" "HTTPS_PROXY=http://REDACTED@h:2"`},
			{"localhost,127.0.0.1,.svc", "localhost,127.0.0.1,.svc"},
			{"user@example.com", "user@example.com"},
		}},
	} {
		t.Run(f.name, func(t *testing.T) {
			for _, tt := range f.cases {
				if got := f.fn(tt.in); got != tt.want {
					t.Errorf("%s(%q) = %q, want %q", f.name, tt.in, got, tt.want)
				}
			}
		})
	}
}

func TestIsPrivateKey(t *testing.T) {
	for _, tt := range []struct {
		path string
		data string
		want bool
	}{
		{"/etc/kubernetes/pki/sa.key", "", true},
		{"/etc/kubernetes/pki/apiserver.crt", "-----BEGIN CERTIFICATE-----", false},
		{"/etc/x.pem", "-----BEGIN EC PRIVATE KEY-----\n", true},
		{"/etc/x.pem", "-----BEGIN OPENSSH PRIVATE KEY-----\n", true},
		{"/etc/containerd/config.toml", "version = 2", false},
	} {
		if got := IsPrivateKey(tt.path, []byte(tt.data)); got != tt.want {
			t.Errorf("IsPrivateKey(%q, %q) = %t", tt.path, tt.data, got)
		}
	}
}

// counting counts the calls that reach a system: each probe, and the
// lookups (Lstat and Stat) together.
type counting struct {
	*system.Tree
	fstype, overlay, runs atomic.Int32
	lookups               atomic.Int64
}

func (c *counting) Lstat(p string) (fs.FileInfo, error) {
	c.lookups.Add(1)
	return c.Tree.Lstat(p)
}

func (c *counting) Stat(p string) (fs.FileInfo, error) {
	c.lookups.Add(1)
	return c.Tree.Stat(p)
}

func (c *counting) FSType(p string) (string, error) { c.fstype.Add(1); return c.Tree.FSType(p) }
func (c *counting) OverlayTrial() error             { c.overlay.Add(1); return c.Tree.OverlayTrial() }
func (c *counting) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, []byte, error) {
	c.runs.Add(1)
	return c.Tree.Run(ctx, argv, stdin, timeout)
}

// TestRecorder: it passes reads through and records them, answers each
// probe once, and refuses every change.
func TestRecorder(t *testing.T) {
	src := copyHost(t, "rootless-v2-overlay-fails")
	c := &counting{Tree: system.NewTree(src)}
	rec := NewRecorder(c)
	for range 3 {
		if err := rec.OverlayTrial(); err == nil {
			t.Fatal("the host's overlay trial fails, the Recorder's passed")
		}
		if _, err := rec.FSType("/kind"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rec.Run(context.Background(), []string{"iptables-nft-save"}, nil, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if c.overlay.Load() != 1 || c.fstype.Load() != 1 || c.runs.Load() != 1 {
		t.Errorf("probes reached the system %d, %d, %d times, want once each", c.overlay.Load(), c.fstype.Load(), c.runs.Load())
	}
	if _, err := rec.ReadFile("/proc/self/uid_map", system.LimitTable); err != nil {
		t.Fatal(err)
	}
	_, _ = rec.Lstat("/nonexistent")
	want := map[string]Access{"/proc/self/uid_map": Read, "/nonexistent": Lstat}
	if diff := cmp.Diff(want, rec.Paths()); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	for name, err := range map[string]error{
		"write":   rec.WriteFile("/etc/machine-id", nil, 0o444),
		"inplace": rec.WriteFileInPlace("/etc/resolv.conf", nil),
		"mkdir":   rec.MkdirAll("/x", 0o755),
		"remove":  rec.Remove("/kind"),
		"link":    rec.Symlink("a", "/b"),
		"chown":   rec.Chown("/kind", 0, 0),
		"chmod":   rec.Chmod("/kind", 0),
		"mount":   rec.Mount("a", "/b", "", 0, ""),
		"umount":  rec.Unmount("/b", 0),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: %v, want ErrReadOnly", name, err)
		}
	}
	if len(c.Changes()) > 0 {
		t.Errorf("changes reached the system: %q", c.Changes())
	}
	env := rec.Env(func(k string) (string, bool) {
		if k == "SET" {
			return "v", true
		}
		return "", false
	})
	env("SET")
	env("UNSET")
	if e := rec.envSeen(); e["SET"] == nil || *e["SET"] != "v" || e["UNSET"] != nil || len(e) != 2 {
		t.Errorf("env recorded: %v", e)
	}
}

// TestEnvironCR: a value with a CR is archived in the NUL form of
// .host/environ, which keeps it; in the line form a CR before the newline
// is the line's end.
func TestEnvironCR(t *testing.T) {
	src := copyHost(t, "docker-v1-cgroupns")
	hosttest.AddFiles(t, src, map[string]string{system.ProbeDir + "/environ": "KIND_DNS_SEARCH=a\r\x00PATH=/usr/bin\x00"})
	tree := system.NewTree(src)
	env, _ := tree.Environ()
	_, _, archive, _, _ := captureTree(t, tree, env)
	got := system.ParseEnviron(readArchive(t, archive)["/"+system.ProbeDir+"/environ"].data)
	if got["KIND_DNS_SEARCH"] != "a\r" {
		t.Errorf("KIND_DNS_SEARCH replays as %q, want %q", got["KIND_DNS_SEARCH"], "a\r")
	}
}
