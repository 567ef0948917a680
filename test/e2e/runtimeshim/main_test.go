//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseCapBnd(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{in: "Name:\tx\nCapBnd:\t000001fffeffffff\nCapAmb:\t0\n", want: 0x000001fffeffffff},
		{in: "CapBnd:\t000001ffffffffff", want: 0x000001ffffffffff},
		{in: "Name:\tx\n", wantErr: true},
		{in: "CapBnd:\tzz\n", wantErr: true},
	} {
		got, err := parseCapBnd(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseCapBnd(%q) = %#x, %v; want %#x, err %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestSpecToEdit(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		doc, procKey string
	}{
		{args: []string{"--root", "/r", "--log", "/l", "--log-format", "json", "--systemd-cgroup", "create", "--bundle", "/b", "--pid-file", "/p", "id"}, doc: "/b/config.json", procKey: "process"},
		{args: []string{"create", "--bundle=/b", "id"}, doc: "/b/config.json", procKey: "process"},
		{args: []string{"run", "-b", "/b", "id"}, doc: "/b/config.json", procKey: "process"},
		{args: []string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "id"}, doc: "/tmp/p.json"},
		{args: []string{"exec", "-p=/tmp/p.json", "id"}, doc: "/tmp/p.json"},
		{args: []string{"exec", "id", "sh"}},
		{args: []string{"--root", "/r", "start", "id"}},
		{args: []string{"--version"}},
		{args: nil},
	} {
		doc, key := specToEdit(tc.args)
		if doc != tc.doc || key != tc.procKey {
			t.Errorf("specToEdit(%q) = %q, %q; want %q, %q", tc.args, doc, key, tc.doc, tc.procKey)
		}
	}
}

// noLimits is a host.hardLimit that knows no rlimit: rlimits stay as they are.
func noLimits(string) (uint64, bool) { return 0, false }

func TestFitSpecCaps(t *testing.T) {
	const noSysResource = 0x000001fffeffffff
	in := `{"ociVersion":"1.0.2","process":{"rlimits":[{"type":"RLIMIT_NOFILE","hard":18446744073709551615,"soft":1048576}],` +
		`"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_FUTURE"],"effective":["CAP_SYS_RESOURCE"],` +
		`"permitted":["CAP_SYS_ADMIN","CAP_SYS_RESOURCE"],"inheritable":[],"ambient":["CAP_SYS_RESOURCE"]}}}`
	out, changed, err := fitSpec([]byte(in), "process", host{noSysResource, noLimits})
	if err != nil || !changed {
		t.Fatalf("fitSpec: changed=%v err=%v", changed, err)
	}
	var got struct {
		Process struct {
			Rlimits []struct {
				Hard uint64 `json:"hard"`
			} `json:"rlimits"`
			Capabilities map[string][]string `json:"capabilities"`
		} `json:"process"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"bounding":    {"CAP_CHOWN", "CAP_FUTURE"},
		"effective":   {},
		"permitted":   {"CAP_SYS_ADMIN"},
		"inheritable": {},
		"ambient":     {},
	}
	if !reflect.DeepEqual(got.Process.Capabilities, want) {
		t.Errorf("capabilities = %v, want %v", got.Process.Capabilities, want)
	}
	if got.Process.Rlimits[0].Hard != 18446744073709551615 {
		t.Errorf("rlimit hard = %d: 64-bit integer not kept exactly", got.Process.Rlimits[0].Hard)
	}

	// A full bounding set changes nothing and returns the input unchanged.
	out, changed, err = fitSpec([]byte(in), "process", host{0x000001ffffffffff, noLimits})
	if err != nil || changed || string(out) != in {
		t.Errorf("full set: changed=%v err=%v", changed, err)
	}
	// An exec process document has capabilities at its top level.
	out, changed, err = fitSpec([]byte(`{"args":["sh"],"capabilities":{"bounding":["CAP_SYS_RESOURCE","CAP_KILL"]}}`), "", host{noSysResource, noLimits})
	if err != nil || !changed || string(out) != `{"args":["sh"],"capabilities":{"bounding":["CAP_KILL"]}}` {
		t.Errorf("exec process: %s changed=%v err=%v", out, changed, err)
	}
	if _, _, err := fitSpec([]byte(`{`), "process", host{noSysResource, noLimits}); err == nil {
		t.Error("invalid JSON: no error")
	}
}

// TestFitSpecRlimits: podman asks for RLIMIT_NOFILE 1048576 on create (in
// config.json) and on exec (in the --process document); a host without
// CAP_SYS_RESOURCE gets its own hard limit instead.
func TestFitSpecRlimits(t *testing.T) {
	const noSysResource, full = 0x000001fffeffffff, 0x000001ffffffffff
	hostLimits := func(name string) (uint64, bool) {
		switch name {
		case "RLIMIT_NOFILE":
			return 20000, true
		case "RLIMIT_NPROC":
			return 18446744073709551615, true
		}
		return 0, false
	}
	for _, tc := range []struct {
		name, in, key string
		bounding      uint64
		want          string // "" = unchanged
	}{
		{
			name:     "podman create",
			in:       `{"process":{"rlimits":[{"type":"RLIMIT_NOFILE","hard":1048576,"soft":1048576},{"type":"RLIMIT_NPROC","hard":4194304,"soft":4194304}]}}`,
			key:      "process",
			bounding: noSysResource,
			want:     `{"process":{"rlimits":[{"hard":20000,"soft":20000,"type":"RLIMIT_NOFILE"},{"hard":4194304,"soft":4194304,"type":"RLIMIT_NPROC"}]}}`,
		},
		{
			name:     "podman exec",
			in:       `{"args":["true"],"rlimits":[{"type":"RLIMIT_NOFILE","hard":1048576,"soft":1024}]}`,
			bounding: noSysResource,
			want:     `{"args":["true"],"rlimits":[{"hard":20000,"soft":1024,"type":"RLIMIT_NOFILE"}]}`,
		},
		{
			name:     "within the host's limit",
			in:       `{"rlimits":[{"type":"RLIMIT_NOFILE","hard":20000,"soft":20000}]}`,
			bounding: noSysResource,
		},
		{
			name:     "a name the host does not know",
			in:       `{"rlimits":[{"type":"RLIMIT_FUTURE","hard":1048576,"soft":1048576}]}`,
			bounding: noSysResource,
		},
		{
			name:     "CAP_SYS_RESOURCE held: runc may raise limits",
			in:       `{"rlimits":[{"type":"RLIMIT_NOFILE","hard":1048576,"soft":1048576}]}`,
			bounding: full,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed, err := fitSpec([]byte(tc.in), tc.key, host{tc.bounding, hostLimits})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if changed != (tc.want != "") || string(out) != want {
				t.Errorf("fitSpec = %s (changed %v), want %s", out, changed, want)
			}
		})
	}
	if _, _, err := fitSpec([]byte(`{"rlimits":[{"type":"RLIMIT_NOFILE","hard":"many","soft":1}]}`), "", host{noSysResource, hostLimits}); err == nil {
		t.Error("a hard limit that is no number: no error")
	}
}

func TestFitToHostKeepsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"process":{"capabilities":{"bounding":["CAP_SYS_RESOURCE"]}}}`), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := fitToHost(path, "process", host{0, noLimits}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if string(data) != `{"process":{"capabilities":{"bounding":[]}}}` {
		t.Errorf("content = %s", data)
	}
}
