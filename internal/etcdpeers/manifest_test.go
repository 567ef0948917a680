package etcdpeers

import (
	"path"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

const podHead = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - command:\n    - etcd\n"

// TestDataDir: the flag as YAML reads it, in each form a scalar may
// take, and an error (never kubeadm's default) for one that is there
// but cannot be used.
func TestDataDir(t *testing.T) {
	for _, tc := range []struct {
		name, manifest, want, err string
	}{
		{"none", podHead, DefaultDataDir, ""},
		{"plain", podHead + "    - --data-dir=/var/lib/etcd-data\n", "/var/lib/etcd-data", ""},
		{"double-quoted", podHead + "    - \"--data-dir=/var/lib/etcd-data\"\n", "/var/lib/etcd-data", ""},
		{"single-quoted", podHead + "    - '--data-dir=/var/lib/etcd-data'\n", "/var/lib/etcd-data", ""},
		{"single-quoted quote", podHead + "    - '--data-dir=/var/lib/it''s'\n", "/var/lib/it's", ""},
		{"escapes", podHead + `    - "\x2d-data-dir=/var/lib/\u0065tcd\tx\"q\\b\/c"` + "\n", "/var/lib/etcd\tx\"q\\b/c", ""},
		{"comment", podHead + "    - --data-dir=/d # the data  \n", "/d", ""},
		{"quoted then comment", podHead + "    - \"--data-dir=/d # not a comment\" # a comment\n", "/d # not a comment", ""},
		{"hash without blank", podHead + "    - --data-dir=/d#x\n", "/d#x", ""},
		{"tabs and CRLF", "spec:\r\n  containers:\r\n  -\tcommand:\r\n    -\t--data-dir=/crlf\r\n", "/crlf", ""},
		{"flow", "spec:\n  containers:\n  - name: etcd\n    command: [etcd, \"--data-dir=/flow\", '--name=a']\n", "/flow", ""},
		{"flow on lines", "spec:\n  containers:\n  - command: [\n      etcd,   # the binary\n      --data-dir=/lines,\n    ]\n", "/lines", ""},
		{"flow entry", "spec:\n  containers:\n  - - [etcd, --data-dir=/nested]\n", "/nested", ""},
		{"flag then value", podHead + "    - --data-dir\n    - /separate\n", "/separate", ""},
		{"single dash", podHead + "    - -data-dir=/single\n", "/single", ""},
		{"last wins", podHead + "    - --data-dir=/first\n    - --data-dir=/second\n", "/second", ""},
		{"cleaned", podHead + "    - --data-dir=/a/./b//c/\n", "/a/b/c", ""},
		{"not in a sequence", "spec:\n  x: |\n    --data-dir=/in-a-block-scalar\n", DefaultDataDir, ""},
		{"mapping value", "args:\n  data-dir: /x\n  --data-dir: /y\n", DefaultDataDir, ""},
		{"other flag", podHead + "    - --data-dir-extra=/no\n", DefaultDataDir, ""},
		{"relative", podHead + "    - --data-dir=var/lib/etcd\n", "", `line 7: --data-dir "var/lib/etcd" is not an absolute path`},
		{"empty", podHead + "    - --data-dir=\n", "", "is not an absolute path"},
		{"unterminated", podHead + "    - \"--data-dir=/var/lib/etcd\n", "", "line 7: an entry naming --data-dir that is not a YAML scalar on one line"},
		{"continued line", podHead + "    - \"--data-dir=/var/\\\n      lib/etcd\"\n", "", "line 7"},
		{"bad escape", podHead + `    - "--data-dir=/\q"` + "\n", "", "not a YAML scalar"},
		{"surrogate", podHead + `    - "--data-dir=/\ud800"` + "\n", "", "not a YAML scalar"},
		{"text after quote", podHead + "    - \"--data-dir=/a\" b\n", "", "not a YAML scalar"},
		{"tagged", podHead + "    - !!str --data-dir=/tagged\n", "", "not a YAML scalar"},
		{"nested flow", "command: [etcd, [--data-dir=/x]]\n", "", "not a YAML scalar"},
		{"flag without value", podHead + "    - --data-dir\n", "", "without a value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DataDir([]byte(tc.manifest))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("DataDir = %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("DataDir = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestFlagName: any flag, not only --data-dir, reads the same way.
func TestFlagName(t *testing.T) {
	m := podHead + "    - '--name=kind-control-plane'\n    - \"--initial-cluster=a=https://172.18.0.3:2380\"\n"
	for name, want := range map[string]string{"name": "kind-control-plane", "initial-cluster": "a=https://172.18.0.3:2380"} {
		if v, _, found, err := flagValue([]byte(m), name); err != nil || !found || v != want {
			t.Errorf("--%s: %q, %v, %v; want %q", name, v, found, err, want)
		}
	}
}

// FuzzDataDir: any manifest is read without a panic, and a data dir
// given is absolute and clean; a path written in each quoted form, and
// in a flow sequence, reads back as written.
func FuzzDataDir(f *testing.F) {
	f.Add([]byte(podHead+"    - --data-dir=/var/lib/etcd\n"), "/var/lib/etcd-data")
	f.Add([]byte("command: [etcd, '--data-dir=/x']\n"), "/it's \"odd\"\t\u2028")
	f.Add([]byte("- \"\\U0001F600\"\n- '\n- [a, [b\n"), "/\x00")
	f.Fuzz(func(t *testing.T, manifest []byte, dir string) {
		if got, err := DataDir(manifest); err == nil && (!path.IsAbs(got) || path.Clean(got) != got) {
			t.Fatalf("DataDir = %q: not absolute and clean", got)
		}
		if !utf8.ValidString(dir) || !path.IsAbs(dir) || strings.ContainsAny(dir, "\r\n") {
			return
		}
		single := "'" + strings.ReplaceAll("--data-dir="+dir, "'", "''") + "'"
		double := strconv.Quote("--data-dir=" + dir) // Go's escapes of valid UTF-8 are YAML's
		for _, m := range []string{
			podHead + "    - " + double + "\n",
			podHead + "    - " + single + "\n",
			"spec:\n  command: [etcd, " + double + ", " + single + "]\n",
			"spec:\n  command: [\n    " + double + " ,\n  ]\n",
		} {
			got, err := DataDir([]byte(m))
			if err != nil || got != path.Clean(dir) {
				t.Fatalf("%q: DataDir = %q, %v; want %q", m, got, err, path.Clean(dir))
			}
		}
	})
}
