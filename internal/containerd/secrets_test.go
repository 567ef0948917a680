package containerd

import (
	"strings"
	"testing"
)

// marker stands for a registry password.
const marker = "SECRET-MARKER-c0de"

const cri = `[plugins."io.containerd.grpc.v1.cri".registry.configs."r.example".auth]` + "\n"

// TestRedact: every way config.toml can hold a registry credential is
// masked, the config still decodes, and what Edit reads of it is kept.
func TestRedact(t *testing.T) {
	for name, cfg := range map[string]string{
		"auth table":          cri + `password = "` + marker + `"` + "\n",
		"identity token":      cri + `identitytoken = '` + marker + `'` + "\n",
		"multi-line string":   cri + `password = """` + "\n" + marker + "\n" + `"""` + "\n",
		"dotted key":          `plugins."io.containerd.grpc.v1.cri".registry.configs."r".auth.password = "` + marker + `"` + "\n",
		"inline auth":         `[plugins."io.containerd.grpc.v1.cri".registry.configs."r"]` + "\nauth = { username = \"u\", password = \"" + marker + "\" }\n",
		"nested inline":       `[plugins."io.containerd.grpc.v1.cri".registry]` + "\nconfigs = { \"r\" = { auth = { password = \"" + marker + "\" } } }\n",
		"headers array":       `[plugins."io.containerd.grpc.v1.cri".registry.headers]` + "\nAuthorization = [\"Bearer " + marker + "\"]\n",
		"inline array":        `[plugins."io.containerd.grpc.v1.cri".registry]` + "\nconfigs = { \"r\" = { x = [{ password = \"" + marker + "\" }] } }\n",
		"array of tables":     "[[x]]\npassword = \"" + marker + "\"\n",
		"array of inline":     "x = [{ password = \"" + marker + "\" }]\n",
		"password as integer": cri + "password = 1234\n",
		"commented out":       cri + "# password = \"" + marker + "\"\n",
		"trailing comment":    cri + "insecure_skip_verify = true # token " + marker + "\n",
		"comment in array":    "x = [\n  1, # secret " + marker + "\n  2,\n]\n",
		"comment in table":    "[registry] # auth " + marker + "\n",
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			in := "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"overlayfs\"\n" + cfg
			got, n, err := Redact([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 || strings.Contains(string(got), marker) || strings.Contains(string(got), "1234") {
				t.Errorf("%d values masked:\n%s", n, got)
			}
			res, err := Edit(got, Change{Snapshotter: "native"})
			if err != nil || res.OldSnapshotter != "overlayfs" {
				t.Errorf("the masked config: %+v, %v\n%s", res, err, got)
			}
		})
	}
	plain := "version = 2\n# a comment\n[plugins.\"io.containerd.grpc.v1.cri\".containerd] # kind's\nsnapshotter = \"overlayfs\"\n"
	if got, n, err := Redact([]byte(plain)); err != nil || n != 0 || string(got) != plain {
		t.Errorf("a config without credentials: %d masked, %v\n%s", n, err, got)
	}
}

// TestErrorsQuoteNoContent: a config.toml broken around a password, in
// each way the reader reports, gives an error with the line and column
// and none of the password: not the marker, not a character of it
// (go-toml's %#U), not a key or a number it made.
func TestErrorsQuoteNoContent(t *testing.T) {
	for name, body := range map[string]string{
		"unquoted":          "password = " + marker + "\n",
		"bad escape":        `password = "\q` + marker + `"` + "\n",
		"newline in string": "password = \"" + marker + "\nx\"\n",
		"torn line":         marker + "\n",
		"duplicate key":     marker + " = 1\n" + marker + " = 2\n",
		"duplicate table":   "[" + marker + "]\n[" + marker + "]\n",
		"float":             "password = 1e99999\n",
		"unterminated":      "password = \"" + marker,
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			in := "version = 2\n" + cri + body
			_, err := Edit([]byte(in), Change{RestrictOOMScoreAdj: true})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, leak := range []string{marker, "U+", "'S'", "'q'", "99999"} {
				if strings.Contains(msg, leak) {
					t.Errorf("%q quotes %q", msg, leak)
				}
			}
			if !strings.HasPrefix(msg, "line ") {
				t.Errorf("%q: no line", msg)
			}
			// Redact scans the syntax only: a value out of range is
			// masked all the same. Keys are kept (a replay needs the
			// config's shape): the duplicates' marker is a key.
			if strings.HasPrefix(name, "duplicate") {
				return
			}
			if got, _, err := Redact([]byte(in)); err != nil && strings.Contains(err.Error(), marker) ||
				err == nil && (strings.Contains(string(got), marker) || strings.Contains(string(got), "99999")) {
				t.Errorf("Redact: %v\n%s", err, got)
			}
		})
	}
	for _, v := range []string{`version = "` + marker + `"`, "version = 2\nplugins = \"" + marker + "\""} {
		if _, err := Edit([]byte(v+"\n"), Change{RestrictOOMScoreAdj: true}); err == nil || strings.Contains(err.Error(), marker) {
			t.Errorf("%q: %v", v, err)
		}
	}
}
