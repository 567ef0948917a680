package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

func TestString(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 300)
	tests := []struct {
		a    Action
		want string
	}{
		{Info("detected cgroup v1"), "log INFO: detected cgroup v1"},
		{Warning("w"), "log WARN: w"},
		{WriteFile("/etc/a", []byte("x\n"), 0o644).Because("why"), `write /etc/a 0644 "x\n"  # why`},
		{WriteFile("/etc/a", long, 0o444), "write /etc/a 0444 (300 bytes, sha256 0d4e2ca9e9cb)"},
		{WriteFile("/etc/a", long, 0o444).ShownWhole(), "write /etc/a 0444 \"" + string(long) + "\""},
		{WriteInPlace("/etc/resolv.conf", []byte("n")), `write-in-place /etc/resolv.conf "n"`},
		{WriteFile("/k.key", []byte("SECRET"), 0o600).Secret(), "write /k.key 0600 (6 bytes, a secret: not shown)"},
		{WriteFile("/k.key", long, 0o600).Secret().ShownWhole(), "write /k.key 0600 (300 bytes, a secret: not shown)"},
		{WriteInPlace("/p", []byte("SECRET")).Secret(), "write-in-place /p (6 bytes, a secret: not shown)"},
		{WriteFile("/c.toml", []byte(`p = "SECRET"`), 0o644).ShownMasked([]byte(`p = "(redacted)"`)), `write /c.toml 0644 "p = \"(redacted)\"" (secrets masked)`},
		{WriteInPlace("/c.toml", []byte(`p = "SECRET"`)).ShownMasked([]byte(`p = "(redacted)"`)), `write-in-place /c.toml "p = \"(redacted)\"" (secrets masked)`},
		{Remove("/k").WithRollback(WriteFile("/k", []byte("SECRET"), 0o600).Secret()), "remove /k [rollback: write /k 0600 (6 bytes, a secret: not shown)]"},
		{Mkdir("/d", 0o755), "mkdir /d 0755"},
		{Remove("/d").OrWarn("failed rmdir /d"), `remove /d [on failure: warn "failed rmdir /d"]`},
		{Symlink("/t", "/l"), "symlink /l -> /t"},
		{Chown("/usr/bin/mount", 0, 0), "chown /usr/bin/mount 0:0"},
		{Chmod("/usr/bin/mount", 0o755|fs.ModeSetuid), "chmod /usr/bin/mount 4755"},
		{Mount("", "/sys", "", system.Remount|system.Bind|system.ReadOnly|system.NoSuid, "").ToleratedInUserNS("UserNS: ignoring mount fail"),
			`mount none on /sys (remount,bind,ro,nosuid) [on failure: tolerated-in-userns "UserNS: ignoring mount fail"]`},
		{Mount("overlay", "/m", "overlay", 0, "lowerdir=/l"), `mount overlay on /m type overlay (none) data "lowerdir=/l"`},
		{Bind("/a", "/b"), "mount /a on /b (bind)"},
		{Unmount("/x").OrIgnore(), "umount /x [on failure: ignore]"},
		{Run([]string{"update-alternatives", "--set", "iptables", "/usr/sbin/iptables-nft"}, nil, 5*time.Second),
			"run update-alternatives --set iptables /usr/sbin/iptables-nft (timeout 5s)"},
		{Run([]string{"iptables-restore"}, []byte("*nat\n"), time.Second), `run iptables-restore < "*nat\n" (timeout 1s)`},
		{Run([]string{"echo", "a b"}, nil, time.Second), `run echo "a b" (timeout 1s)`},
		{WriteFile("/etc/machine-id", []byte("x"), 0o444).OnEveryBoot(), `write /etc/machine-id 0444 "x" [every boot]`},
		{Sync(), "sync"},
	}
	for _, tt := range tests {
		if got := tt.a.String(); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}

func TestMarshalJSON(t *testing.T) {
	b, err := json.Marshal([]Action{
		Mount("", "/", "", system.Rec|system.Shared, "").Because("propagation"),
		Info("hello"),
		Chmod("/m", 0o755),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"mount","path":"/","flags":"rec,shared","reason":"propagation","on_fail":"fatal"},` +
		`{"op":"log","data":"hello","level":"INFO"},` +
		`{"op":"chmod","path":"/m","mode":"0755","on_fail":"fatal"}]`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestMarshalJSONBytes: the JSON plan says which bytes a write or a run's
// input are, not their UTF-8 replacement (a Latin-1 comment in
// resolv.conf): content that is not UTF-8 is given in base64.
func TestMarshalJSONBytes(t *testing.T) {
	b, err := json.Marshal([]Action{
		WriteInPlace("/etc/resolv.conf", []byte("# caf\xe9\n")),
		Run([]string{"iptables-nft-restore"}, []byte("\xff"), 0),
		WriteFile("/f", []byte("ok"), 0o644),
		WriteFile("/k", []byte("SECRET\xff"), 0o600).Secret(),
		WriteFile("/c", []byte(`p = "SECRET"`), 0o644).ShownMasked([]byte(`p = "(redacted)"`)),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"write-in-place","path":"/etc/resolv.conf","data_base64":"IyBjYWbpCg==","on_fail":"fatal"},` +
		`{"op":"run","argv":["iptables-nft-restore"],"stdin_base64":"/w==","on_fail":"fatal"},` +
		`{"op":"write","path":"/f","data":"ok","mode":"0644","on_fail":"fatal"},` +
		`{"op":"write","path":"/k","secret":true,"data_bytes":7,"mode":"0600","on_fail":"fatal"},` +
		`{"op":"write","path":"/c","data":"p = \"(redacted)\"","masked":true,"data_bytes":12,"mode":"0644","on_fail":"fatal"}]`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestConverged(t *testing.T) {
	if !Converged([]Action{Info("x"), WriteFile("/m", nil, 0).OnEveryBoot()}) {
		t.Error("log lines and every-boot changes must count as converged")
	}
	if Converged([]Action{Info("x"), Mkdir("/d", 0o755)}) {
		t.Error("a mkdir is a change")
	}
}

// failingTree is a Tree whose changes all fail.
func failingTree(t *testing.T) *system.Tree {
	tree := system.NewTree(t.TempDir())
	tree.Fail = func(op, path string) error { return errors.New("injected") }
	return tree
}

func TestApplyPolicies(t *testing.T) {
	tests := []struct {
		name    string
		a       Action
		userNS  bool
		wantErr bool
		wantLog string
	}{
		{"fatal", Mkdir("/d", 0o755).Because("make d"), false, true, ""},
		{"warn", Mkdir("/d", 0o755).OrWarn("failed mkdir /d"), false, false, "WARN: failed mkdir /d\n"},
		{"ignore", Mkdir("/d", 0o755).OrIgnore(), false, false, ""},
		{"userns tolerated", Mkdir("/d", 0o755).ToleratedInUserNS("UserNS: ignoring mount fail"), true, false, "INFO: UserNS: ignoring mount fail\n"},
		{"userns policy outside userns", Mkdir("/d", 0o755).ToleratedInUserNS("UserNS: ignoring mount fail"), false, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			err := Apply(context.Background(), failingTree(t), logline.New(&log, logline.Text),
				[]Action{tt.a, Info("after")}, tt.userNS)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %t", err, tt.wantErr)
			}
			want := tt.wantLog + "INFO: after\n"
			if tt.wantErr {
				want = ""
			}
			if diff := cmp.Diff(want, log.String()); diff != "" {
				t.Errorf("log (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyFatalNamesReason(t *testing.T) {
	err := Apply(context.Background(), failingTree(t), nil, []Action{Mkdir("/d", 0o755).Because("make d")}, false)
	if err == nil || err.Error() != "make d: mkdir /d: injected" {
		t.Errorf("err = %v", err)
	}
}

func TestApplyTree(t *testing.T) {
	dir := t.TempDir()
	tree := system.NewTree(dir)
	var log bytes.Buffer
	err := Apply(context.Background(), tree, logline.New(&log, logline.Text), []Action{
		Info("one"),
		Mkdir("/etc/x", 0o755),
		WriteFile("/etc/x/f", []byte("hi\n"), 0o600),
		Symlink("/etc/x/f", "/etc/x/l"),
		Chmod("/etc/x/f", 0o640),
		Warning("two"),
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "etc/x/f"))
	if err != nil || string(b) != "hi\n" {
		t.Errorf("file = %q, %v", b, err)
	}
	fi, _ := os.Stat(filepath.Join(dir, "etc/x/f"))
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v", fi.Mode())
	}
	want := []string{"mkdir /etc/x", `write /etc/x/f 0600 "hi\n"`, "symlink /etc/x/l -> /etc/x/f", "chmod /etc/x/f -rw-r-----"}
	if diff := cmp.Diff(want, tree.Changes()); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("INFO: one\nWARN: two\n", log.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

// TestPreflight: a dry run calls no plan fine that its apply would stop at
// for the file types on the way.
func TestPreflight(t *testing.T) {
	root := hosttest.Dir(t, map[string]string{"etc/machine-id/x": "x", "kind": "x", "etc/ok": "x"})
	if err := os.Symlink("/nonexistent", filepath.Join(root, "etc/dangling")); err != nil {
		t.Fatal(err)
	}
	sys := system.NewTree(root)
	for _, c := range []struct {
		name    string
		actions []Action
		want    string
	}{
		{"write over a directory", []Action{WriteFile("/etc/machine-id", nil, 0o444)}, "write (planned) /etc/machine-id: is a directory"},
		{"write below a file", []Action{WriteFile("/kind/product_name", nil, 0o644)}, "write (planned) /kind/product_name: not a directory"},
		{"mkdir below a file", []Action{Mkdir("/kind/a/b", 0o755)}, "mkdir (planned) /kind/a/b: not a directory"},
		{"a warning is no failure", []Action{WriteFile("/kind/x", nil, 0o644).OrWarn("w")}, ""},
		{"made by the plan", []Action{Mkdir("/etc/new/dir", 0o755), WriteFile("/etc/new/dir/f", nil, 0o644)}, ""},
		{"removed by the plan", []Action{Remove("/kind"), Mkdir("/kind", 0o755), WriteFile("/kind/f", nil, 0o644)}, ""},
		{"a file", []Action{WriteFile("/etc/ok", nil, 0o644), WriteInPlace("/etc/ok", nil)}, ""},
		// symlink(2) replaces nothing: EEXIST, whatever is there (a
		// link to elsewhere included, which Stat would not see).
		{"symlink over a file", []Action{Symlink("/x", "/etc/ok")}, "symlink (planned) /etc/ok: file exists"},
		{"symlink over a dangling link", []Action{Symlink("/x", "/etc/dangling")}, "symlink (planned) /etc/dangling: file exists"},
		{"symlink over what the plan removes", []Action{Remove("/etc/ok"), Symlink("/x", "/etc/ok")}, ""},
	} {
		err := Preflight(sys, c.actions)
		if got := fmt.Sprint(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
