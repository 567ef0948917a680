package containerd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// goldenCase edits a whole config file from testdata and compares the
// result with testdata/<fixture>.<name>.golden.
type goldenCase struct {
	fixture string
	name    string
	ch      Change
	want    Result // Config is ignored: it comes from the golden file
}

func goldenCases() []goldenCase {
	return []goldenCase{
		// kind's own node config (v0.23.0), schema version 2.
		{"kind-v2.toml", "native", Change{Snapshotter: "native"}, Result{Changed: true, OldSnapshotter: "overlayfs", Version: 2}},
		{"kind-v2.toml", "fuse-overlayfs", Change{Snapshotter: "fuse-overlayfs"}, Result{Changed: true, OldSnapshotter: "overlayfs", Version: 2}},
		{"kind-v2.toml", "restrict", Change{RestrictOOMScoreAdj: true}, Result{Changed: true, OldSnapshotter: "overlayfs", Version: 2}},
		{"kind-v2.toml", "userns", Change{Snapshotter: "fuse-overlayfs", RestrictOOMScoreAdj: true}, Result{Changed: true, OldSnapshotter: "overlayfs", Version: 2}},
		// The same layout in the containerd 2.x schema.
		{"kind-v3.toml", "native", Change{Snapshotter: "native"}, Result{Changed: true, OldSnapshotter: "overlayfs", Version: 3}},
		{"kind-v3.toml", "restrict", Change{RestrictOOMScoreAdj: true}, Result{Changed: true, OldSnapshotter: "overlayfs", Version: 3}},
		{"kind-v3.toml", "userns", Change{Snapshotter: "fuse-overlayfs", RestrictOOMScoreAdj: true}, Result{Changed: true, OldSnapshotter: "overlayfs", Version: 3}},
		// `containerd config default` style: literal strings, nested indentation.
		{"containerd-default-v3.toml", "userns", Change{Snapshotter: "fuse-overlayfs", RestrictOOMScoreAdj: true}, Result{Changed: true, OldSnapshotter: "overlayfs", Version: 3}},
		{"containerd-default-v3.toml", "zfs", Change{Snapshotter: "native"}, Result{Changed: true, OldSnapshotter: "overlayfs", Version: 3}},
	}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEditGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.fixture+"/"+tc.name, func(t *testing.T) {
			in := readTestdata(t, tc.fixture)
			got, err := Edit(in, tc.ch)
			if err != nil {
				t.Fatalf("Edit: %v", err)
			}
			golden := filepath.Join("testdata", strings.TrimSuffix(tc.fixture, ".toml")+"."+tc.name+".golden")
			hosttest.Golden(t, golden, got.Config)
			tc.want.Config = got.Config // compared just above
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Result mismatch (-want +got):\n%s", diff)
			}
			checkEdit(t, in, tc.ch)
		})
	}
}

// TestEditUnchanged covers files that already say what the change wants:
// the result must be the input, byte for byte, so the caller writes nothing.
func TestEditUnchanged(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		ch      Change
		wantOld string
		version int
	}{
		{"kind v2 overlayfs", readTestdata(t, "kind-v2.toml"), Change{Snapshotter: "overlayfs"}, "overlayfs", 2},
		{"kind v3 overlayfs", readTestdata(t, "kind-v3.toml"), Change{Snapshotter: "overlayfs"}, "overlayfs", 3},
		{"kind v2 no change asked", readTestdata(t, "kind-v2.toml"), Change{}, "overlayfs", 2},
		{"no change asked, keys absent", []byte("version = 3\n"), Change{}, "", 3},
		{"restrict already true", []byte("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = true\n"), Change{RestrictOOMScoreAdj: true}, "", 2},
		{"literal string already equal", []byte("version = 3\n[plugins.'io.containerd.cri.v1.images']\nsnapshotter = 'native'\n"), Change{Snapshotter: "native"}, "native", 3},
		{"both already set, CRLF", []byte("version = 2\r\n[plugins.\"io.containerd.grpc.v1.cri\"]\r\n  restrict_oom_score_adj = true\r\n  containerd.snapshotter = \"native\"\r\n"), Change{Snapshotter: "native", RestrictOOMScoreAdj: true}, "native", 2},
		// The snapshotter is only read, so a value of the wrong type is
		// left to containerd to complain about.
		{"odd snapshotter left alone", []byte("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\ncontainerd = 5\nrestrict_oom_score_adj = true\n"), Change{RestrictOOMScoreAdj: true}, "", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Edit(tc.in, tc.ch)
			if err != nil {
				t.Fatalf("Edit: %v", err)
			}
			want := Result{Config: tc.in, Changed: false, OldSnapshotter: tc.wantOld, Version: tc.version}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Result mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// editCase is an inline input and its full expected output.
type editCase struct {
	name    string
	in      string
	ch      Change
	want    string
	wantOld string
	crlf    bool // run with every "\n" of in and want turned into "\r\n"
}

func editCases() []editCase {
	const both = "native"
	return []editCase{
		{
			name: "missing key goes after the table's last key, before comments of the next table",
			in: `version = 2

[plugins."io.containerd.grpc.v1.cri".containerd]
  # save disk space
  discard_unpacked_layers = true
  default_runtime_name = "runc" # trailing comment

  # this comment introduces the next table
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
`,
			ch: Change{Snapshotter: "native"},
			want: `version = 2

[plugins."io.containerd.grpc.v1.cri".containerd]
  # save disk space
  discard_unpacked_layers = true
  default_runtime_name = "runc" # trailing comment
  snapshotter = "native"

  # this comment introduces the next table
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
`,
		},
		{
			name: "missing key after a multi-line value",
			in: `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = """
registry.k8s.io/pause:3.7"""
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/opt/cni/bin"
`,
			ch: Change{RestrictOOMScoreAdj: true},
			want: `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = """
registry.k8s.io/pause:3.7"""
  restrict_oom_score_adj = true
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/opt/cni/bin"
`,
		},
		{
			name: "missing key in a table with tab indentation",
			in:   "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n\tdefault_runtime_name = \"runc\"\n",
			ch:   Change{Snapshotter: "native"},
			want: "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n\tdefault_runtime_name = \"runc\"\n\tsnapshotter = \"native\"\n",
		},
		{
			name: "missing key in a table with no keys",
			in: `version = 3
[plugins]
  [plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'registry.k8s.io/pause:3.10'
`,
			ch: Change{Snapshotter: "native"},
			want: `version = 3
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "native"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'registry.k8s.io/pause:3.10'
`,
		},
		{
			name: "missing key, last line has no newline",
			in:   "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.7\" # pinned",
			ch:   Change{RestrictOOMScoreAdj: true},
			want: "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.7\" # pinned\n  restrict_oom_score_adj = true",
		},
		{
			name: "missing table that only sub-table headers define implicitly",
			in: `version = 2

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
`,
			ch: Change{Snapshotter: "native"},
			want: `version = 2

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native"
`,
		},
		{
			name: "missing tables, v2, file already ends with a blank line",
			in:   "version = 2\n\n",
			ch:   Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			want: `version = 2

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native"

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
`,
		},
		{
			name: "missing tables, v3, no final newline",
			in:   "version = 3 # containerd 2",
			ch:   Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			want: `version = 3 # containerd 2

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
`,
		},
		{
			name: "dotted keys under the parent table",
			in: `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  containerd.snapshotter = "overlayfs"
  restrict_oom_score_adj = false
`,
			ch:      Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			wantOld: "overlayfs",
			want: `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  containerd.snapshotter = "native"
  restrict_oom_score_adj = true
`,
		},
		{
			name: "missing key in a table made by dotted keys joins them",
			in: `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  containerd.default_runtime_name = "runc"
  containerd.discard_unpacked_layers = true
  sandbox_image = "registry.k8s.io/pause:3.7"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
`,
			ch: Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			want: `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  containerd.default_runtime_name = "runc"
  containerd.discard_unpacked_layers = true
  containerd.snapshotter = "native"
  sandbox_image = "registry.k8s.io/pause:3.7"
  restrict_oom_score_adj = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
`,
		},
		{
			name: "dotted keys from the root, whitespace around dots, literal quoting",
			in: `version = 3
plugins . 'io.containerd.cri.v1.images' . snapshotter = 'overlayfs'
plugins.'io.containerd.cri.v1.runtime'.enable_selinux = false
`,
			ch:      Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			wantOld: "overlayfs",
			want: `version = 3
plugins . 'io.containerd.cri.v1.images' . snapshotter = "native"
plugins.'io.containerd.cri.v1.runtime'.enable_selinux = false
plugins.'io.containerd.cri.v1.runtime'.restrict_oom_score_adj = true
`,
		},
		{
			name: "table made by dotted keys under [plugins]",
			in: `version = 3
[plugins]
  'io.containerd.cri.v1.images'.discard_unpacked_layers = true
  "io.containerd.cri.v1.runtime" . enable_selinux = false
`,
			ch: Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			want: `version = 3
[plugins]
  'io.containerd.cri.v1.images'.discard_unpacked_layers = true
  'io.containerd.cri.v1.images'.snapshotter = "native"
  "io.containerd.cri.v1.runtime" . enable_selinux = false
  "io.containerd.cri.v1.runtime".restrict_oom_score_adj = true
`,
		},
		{
			name: "quoted name variants in headers and keys",
			in: `version = 2
[ plugins . 'io.containerd.grpc.v1.cri' . "containerd" ]
  "snapshotter" = "overlayfs"
["plugins".'io.containerd.grpc.v1.cri']
  'restrict_oom_score_adj'=false
`,
			ch:      Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			wantOld: "overlayfs",
			want: `version = 2
[ plugins . 'io.containerd.grpc.v1.cri' . "containerd" ]
  "snapshotter" = "native"
["plugins".'io.containerd.grpc.v1.cri']
  'restrict_oom_score_adj'=true
`,
		},
		{
			name: "escaped characters in a quoted table name",
			in: `version = 2
[plugins."io.containerd.grpc\u002ev1.cri".containerd]
  snapshotter = "overlayfs"
`,
			ch:      Change{Snapshotter: "native"},
			wantOld: "overlayfs",
			want: `version = 2
[plugins."io.containerd.grpc\u002ev1.cri".containerd]
  snapshotter = "native"
`,
		},
		{
			name: "comments after the value stay",
			in: `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs" # default
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = false	#	rootless wants true
`,
			ch:      Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			wantOld: "overlayfs",
			want: `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native" # default
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true	#	rootless wants true
`,
		},
		{
			name: "other string forms become a basic string",
			in: `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = """overlayfs"""
  default_runtime_name = '''runc'''
`,
			ch:      Change{Snapshotter: "fuse-overlayfs"},
			wantOld: "overlayfs",
			want: `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "fuse-overlayfs"
  default_runtime_name = '''runc'''
`,
		},
		{
			name:    "value at the very end, no newline",
			in:      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"overlayfs\"",
			ch:      Change{Snapshotter: "native"},
			wantOld: "overlayfs",
			want:    "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"native\"",
		},
		{
			name: "value inside an inline table",
			in: `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  containerd = { snapshotter = "overlayfs", default_runtime_name = "runc" }
  restrict_oom_score_adj = false
`,
			ch:      Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			wantOld: "overlayfs",
			want: `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  containerd = { snapshotter = "native", default_runtime_name = "runc" }
  restrict_oom_score_adj = true
`,
		},
		{
			name: "arrays of tables elsewhere are not confused with the target",
			in: `version = 2
[[plugins."io.containerd.grpc.v1.cri".containerd.extra]]
  snapshotter = "overlayfs"
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
`,
			ch:      Change{Snapshotter: "native"},
			wantOld: "overlayfs",
			want: `version = 2
[[plugins."io.containerd.grpc.v1.cri".containerd.extra]]
  snapshotter = "overlayfs"
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native"
`,
		},
		{
			// TOML lets a [header] add a sub-table to a table that dotted
			// keys made, but not reopen that table itself.
			name: "parent made by dotted keys, missing table added as a sub-table",
			in: `version = 2
[plugins]
  "io.containerd.grpc.v1.cri".sandbox_image = "registry.k8s.io/pause:3.7"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
`,
			ch: Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			want: `version = 2
[plugins]
  "io.containerd.grpc.v1.cri".sandbox_image = "registry.k8s.io/pause:3.7"
  "io.containerd.grpc.v1.cri".restrict_oom_score_adj = true
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native"
`,
		},
		{
			name: "table appended after an array of tables",
			in: `version = 3
[[proxy]]
  name = "a"
`,
			ch: Change{RestrictOOMScoreAdj: true},
			want: `version = 3
[[proxy]]
  name = "a"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
`,
		},
		{
			name: "v2 keys in a v3 file are not the v3 keys",
			in: `version = 3
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
`,
			ch: Change{Snapshotter: "native"},
			want: `version = 3
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
`,
		},
		{
			name: "CRLF: value replaced",
			in: `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
`,
			ch:      Change{Snapshotter: "native"},
			wantOld: "overlayfs",
			want: `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native"
`,
			crlf: true,
		},
		{
			name: "CRLF: key and table added",
			in: `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.7"
`,
			ch: Change{Snapshotter: both, RestrictOOMScoreAdj: true},
			want: `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.7"
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "native"
`,
			crlf: true,
		},
	}
}

func (tc editCase) input() []byte {
	if tc.crlf {
		return []byte(strings.ReplaceAll(tc.in, "\n", "\r\n"))
	}
	return []byte(tc.in)
}

func TestEdit(t *testing.T) {
	for _, tc := range editCases() {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.input()
			want := tc.want
			if tc.crlf {
				want = strings.ReplaceAll(want, "\n", "\r\n")
			}
			got, err := Edit(in, tc.ch)
			if err != nil {
				t.Fatalf("Edit: %v", err)
			}
			if diff := cmp.Diff(want, string(got.Config)); diff != "" {
				t.Errorf("config mismatch (-want +got):\n%s", diff)
			}
			if !got.Changed {
				t.Error("Changed = false, want true")
			}
			if got.OldSnapshotter != tc.wantOld {
				t.Errorf("OldSnapshotter = %q, want %q", got.OldSnapshotter, tc.wantOld)
			}
			checkEdit(t, in, tc.ch)
		})
	}
}

// editErrorCase is an input Edit refuses, and the error it gives.
type editErrorCase struct {
	name string
	in   string
	ch   Change
	want string
}

func TestEditErrors(t *testing.T) {
	kind := string(readTestdata(t, "kind-v2.toml"))
	tests := []editErrorCase{
		{
			name: "unclosed table header",
			in:   "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"\n  x = 1\n",
			ch:   Change{Snapshotter: "native"},
			want: "line 3, column 37: expected ']' to close table name",
		},
		{
			name: "garbage deep in kind's file",
			in:   strings.Replace(kind, "  SystemdCgroup = true\n", "  SystemdCgroup = yes\n", 1),
			ch:   Change{Snapshotter: "native"},
			want: "line 24, column 21: unexpected character (a character, not quoted) at start of value",
		},
		{
			name: "duplicate key",
			in:   "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n  snapshotter = \"native\"\n",
			ch:   Change{Snapshotter: "native"},
			want: "line 4, column 3: key (named at this position) is already defined",
		},
		{
			name: "duplicate table",
			in:   "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n[plugins.'io.containerd.grpc.v1.cri']\n",
			ch:   Change{RestrictOOMScoreAdj: true},
			want: "line 3, column 2: table (named at this position) already exists",
		},
		{
			name: "duplicate key even when nothing is asked",
			in:   "version = 2\nversion = 2\n",
			want: "line 2, column 1: key (named at this position) is already defined",
		},
		{
			name: "no version",
			in:   "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n",
			ch:   Change{Snapshotter: "native"},
			want: "unsupported containerd config version 1 (want 2, 3 or 4): there is no top-level version key, which containerd reads as version 1",
		},
		{
			name: "version 1",
			in:   "version = 1\n",
			ch:   Change{Snapshotter: "native"},
			want: "line 1, column 1: unsupported containerd config version 1 (want 2, 3 or 4)",
		},
		{
			name: "version 5",
			in:   "# future\nversion = 5\n",
			ch:   Change{Snapshotter: "native"},
			want: "line 2, column 1: unsupported containerd config version 5 (want 2, 3 or 4)",
		},
		{
			name: "version as a string",
			in:   "version = \"2\"\n",
			want: "line 1, column 1: unsupported containerd config version a string of 1 bytes (want 2, 3 or 4): not an integer",
		},
		{
			name: "version as a long string",
			in:   "version = \"" + strings.Repeat("2", 100000) + "\"\n",
			want: "line 1, column 1: unsupported containerd config version a string of 100000 bytes (want 2, 3 or 4): not an integer",
		},
		{
			name: "version as a float",
			in:   "version = 2.0\n",
			want: "line 1, column 1: unsupported containerd config version the float 2 (want 2, 3 or 4): not an integer",
		},
		{
			name: "version only inside a table",
			in:   "[plugins]\nversion = 2\n",
			want: "unsupported containerd config version 1 (want 2, 3 or 4): there is no top-level version key, which containerd reads as version 1",
		},
		{
			name: "snapshotter is not a string",
			in:   "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = 7\n",
			ch:   Change{Snapshotter: "native"},
			want: "line 3, column 3: plugins.\"io.containerd.grpc.v1.cri\".containerd.snapshotter is the integer 7, want a string",
		},
		{
			name: "restrict_oom_score_adj is not a boolean",
			in:   "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  restrict_oom_score_adj = \"true\"\n",
			ch:   Change{RestrictOOMScoreAdj: true},
			want: "line 3, column 3: plugins.\"io.containerd.cri.v1.runtime\".restrict_oom_score_adj is a string of 4 bytes, want a boolean",
		},
		{
			name: "a value where a table must be",
			in:   "version = 2\n[plugins]\n  \"io.containerd.grpc.v1.cri\" = \"off\"\n",
			ch:   Change{Snapshotter: "native"},
			want: "line 3, column 3: plugins.\"io.containerd.grpc.v1.cri\" is a string of 3 bytes, want a table (needed for plugins.\"io.containerd.grpc.v1.cri\".containerd.snapshotter)",
		},
		{
			name: "an array of tables where a table must be",
			in:   "version = 2\n[[plugins.\"io.containerd.grpc.v1.cri\".containerd]]\n  snapshotter = \"overlayfs\"\n",
			ch:   Change{Snapshotter: "native"},
			want: "line 2, column 3: plugins.\"io.containerd.grpc.v1.cri\".containerd is an array, want a table (needed for plugins.\"io.containerd.grpc.v1.cri\".containerd.snapshotter)",
		},
		{
			name: "adding to an inline table",
			in:   "version = 2\n[plugins]\n  \"io.containerd.grpc.v1.cri\" = { containerd = { snapshotter = \"overlayfs\" } }\n",
			ch:   Change{Snapshotter: "native", RestrictOOMScoreAdj: true},
			want: "cannot add plugins.\"io.containerd.grpc.v1.cri\".restrict_oom_score_adj: its table is an inline table, which this tool does not edit",
		},
		{
			name: "not TOML at all",
			in:   "\x00\x01\x02",
			want: "line 1, column 1: invalid character at start of key: (a character, not quoted)",
		},
	}
	// Names that are not a snapshotter's, in kind's own file: the error
	// quotes the name (escapes and all) and says what a name may hold.
	for _, bad := range []struct{ name, snapshotter string }{
		{"upper case snapshotter", "Native"},
		{"snapshotter starting with a dash", "-native"},
		{"snapshotter that would break the string", "native\"\nx = \"y"},
		{"snapshotter with a slash", "overlay/fs"},
		{"snapshotter longer than a state directory's name allows", strings.Repeat("n", 227)},
	} {
		tests = append(tests, editErrorCase{bad.name, kind, Change{Snapshotter: bad.snapshotter},
			`invalid snapshotter name ` + logline.QuoteClipped(bad.snapshotter) + `: want lowercase letters, digits, '.', '_' or '-', starting with a letter or digit, at most 226 bytes`})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Edit([]byte(tc.in), tc.ch)
			if err == nil {
				t.Fatalf("Edit succeeded with %q, want error %q", got.Config, tc.want)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(Result{}, got); diff != "" {
				t.Errorf("Result on error is not zero (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEditHugeFile: a config at its size cap, of runtime handlers with
// long names (some 1000, under maxKeyParts), is edited where it should be
// and nowhere else.
func TestEditHugeFile(t *testing.T) {
	var b strings.Builder
	b.Write(readTestdata(t, "kind-v2.toml"))
	for i := 0; b.Len() < maxConfigSize-300; i++ {
		b.WriteString("\n# a runtime handler\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"handler-")
		b.WriteString(strings.Repeat("x", 100+i%50))
		b.WriteString(string(rune('a'+i%26)) + "-" + strconv.Itoa(i))
		b.WriteString("\"]\n  runtime_type = \"io.containerd.runc.v2\"\n  snapshotter = \"overlayfs\"\n")
	}
	in := b.String()
	got, err := Edit([]byte(in), Change{Snapshotter: "native", RestrictOOMScoreAdj: true})
	if err != nil {
		t.Fatalf("Edit: %v", err)
	}
	// Only the first snapshotter (the CRI one) and the single
	// restrict_oom_score_adj may change; the runtimes' keys must not.
	want := strings.Replace(in, `snapshotter = "overlayfs"`, `snapshotter = "native"`, 1)
	want = strings.Replace(want, "restrict_oom_score_adj = false", "restrict_oom_score_adj = true", 1)
	if string(got.Config) != want {
		t.Errorf("huge file edited wrongly (-want +got):\n%s", cmp.Diff(want, string(got.Config)))
	}

	if len(in) > maxConfigSize {
		t.Fatalf("test input is %d bytes, over the limit", len(in))
	}

	tooBig := make([]byte, maxConfigSize+1)
	if _, err := Edit(tooBig, Change{Snapshotter: "native"}); err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Errorf("Edit of %d bytes: err = %v, want a size error", len(tooBig), err)
	}
}

// TestEditProperties runs every accepted input through checkEdit with a
// spread of changes, beyond the one its table case asks for.
func TestEditProperties(t *testing.T) {
	changes := []Change{
		{},
		{Snapshotter: "native"},
		{Snapshotter: "overlayfs"},
		{RestrictOOMScoreAdj: true},
		{Snapshotter: "fuse-overlayfs", RestrictOOMScoreAdj: true},
	}
	for _, in := range propertyInputs(t) {
		for _, ch := range changes {
			if _, err := Edit(in, ch); err != nil {
				continue
			}
			checkEdit(t, in, ch)
		}
	}
}

func propertyInputs(t testing.TB) [][]byte {
	var ins [][]byte
	for _, f := range []string{"kind-v2.toml", "kind-v3.toml", "containerd-default-v3.toml"} {
		b := readTestdata(t, f)
		ins = append(ins, b, bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")), bytes.TrimSuffix(b, []byte("\n")))
	}
	for _, tc := range editCases() {
		ins = append(ins, tc.input())
	}
	return ins
}

// checkEdit asserts what must hold for any input Edit accepts:
//   - everything outside the splices is the input, byte for byte; a
//     replaced range is exactly one whole value token, and an inserted text
//     is whole lines at a line boundary, in the file's line ending;
//   - the result decodes strictly and reads back the requested values;
//   - a second Edit with the same change changes nothing.
func checkEdit(t testing.TB, in []byte, ch Change) {
	t.Helper()
	res, splices, err := edit(in, ch)
	if err != nil {
		t.Fatalf("edit(%q, %+v): %v", in, ch, err)
	}
	if !res.Changed {
		if !bytes.Equal(res.Config, in) || len(splices) != 0 {
			t.Fatalf("unchanged result differs from the input: %q", res.Config)
		}
	} else if len(splices) == 0 {
		t.Fatal("Changed with no splices")
	}

	var rebuilt []byte
	prev := 0
	// A file of CRLF lines gets CRLF lines; one that mixes both has no one
	// line ending to keep (Edit follows the first line's).
	crlf := bytes.Contains(in, []byte("\r\n")) && bytes.Count(in, []byte("\r\n")) == bytes.Count(in, []byte("\n"))
	for _, s := range splices {
		if s.start < prev || s.end < s.start || s.end > len(in) {
			t.Fatalf("splices overlap or run out of the input: %+v", splices)
		}
		rebuilt = append(append(rebuilt, in[prev:s.start]...), s.text...)
		prev = s.end
		if crlf && strings.Count(s.text, "\n") != strings.Count(s.text, "\r\n") {
			t.Errorf("splice %q mixes a bare LF into a CRLF file", s.text)
		}
		if s.start == s.end {
			atLineStart := s.start > 0 && in[s.start-1] == '\n' && strings.HasSuffix(s.text, "\n")
			atEOF := s.start == len(in) && (len(in) == 0 || in[len(in)-1] != '\n') && strings.HasPrefix(strings.TrimPrefix(s.text, "\r"), "\n")
			if !atLineStart && !atEOF {
				t.Errorf("insertion %q at %d is not whole lines at a line boundary", s.text, s.start)
			}
			continue
		}
		var old, repl map[string]any
		if err := toml.Unmarshal(append([]byte("v = "), in[s.start:s.end]...), &old); err != nil {
			t.Errorf("replaced bytes %q are not one whole TOML value: %v", in[s.start:s.end], err)
		}
		if err := toml.Unmarshal([]byte("v = "+s.text), &repl); err != nil {
			t.Errorf("replacement %q is not a TOML value: %v", s.text, err)
		}
	}
	rebuilt = append(rebuilt, in[prev:]...)
	if !bytes.Equal(rebuilt, res.Config) {
		t.Fatalf("output is more than the input plus its splices:\n%s", cmp.Diff(string(rebuilt), string(res.Config)))
	}

	var doc map[string]any
	if err := toml.Unmarshal(res.Config, &doc); err != nil {
		t.Fatalf("output does not decode: %v\n%s", err, res.Config)
	}
	sch, ok := schemaFor(int64(res.Version))
	if !ok {
		t.Fatalf("Version = %d", res.Version)
	}
	if ch.Snapshotter != "" {
		if got := readPath(doc, sch.snapshotter); got != ch.Snapshotter {
			t.Errorf("snapshotter reads back as %#v, want %q\n%s", got, ch.Snapshotter, res.Config)
		}
	}
	if ch.RestrictOOMScoreAdj {
		if got := readPath(doc, sch.restrictOOM); got != true {
			t.Errorf("restrict_oom_score_adj reads back as %#v, want true\n%s", got, res.Config)
		}
	}

	again, err := Edit(res.Config, ch)
	if err != nil {
		t.Fatalf("second Edit: %v\n%s", err, res.Config)
	}
	if again.Changed || !bytes.Equal(again.Config, res.Config) {
		t.Errorf("second Edit changed the config again:\n%s", cmp.Diff(string(res.Config), string(again.Config)))
	}
	if ch.Snapshotter != "" && again.OldSnapshotter != ch.Snapshotter {
		t.Errorf("second Edit found snapshotter %q, want %q", again.OldSnapshotter, ch.Snapshotter)
	}
}

// readPath is the test's own walk of a decoded document, independent of
// lookup.
func readPath(doc map[string]any, path []string) any {
	var cur any = doc
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

func TestPositionErrorIsPlain(t *testing.T) {
	_, err := Edit([]byte("version = 2\n  = 1\n"), Change{})
	var pe *positionError
	if !errors.As(err, &pe) || pe.line != 2 || pe.column != 3 {
		t.Fatalf("err = %#v, want a positionError at line 2, column 3", err)
	}
}

// Version 4 (containerd 2.2) keeps version 3's keys; kind treats it as 3.
func TestEditVersion4(t *testing.T) {
	in := "version = 4\n\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'overlayfs' # default\n"
	want := "version = 4\n\n[plugins.'io.containerd.cri.v1.images']\n  snapshotter = \"native\" # default\n" +
		"\n[plugins.\"io.containerd.cri.v1.runtime\"]\n  restrict_oom_score_adj = true\n"
	res, err := Edit([]byte(in), Change{Snapshotter: "native", RestrictOOMScoreAdj: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 4 || res.OldSnapshotter != "overlayfs" || !res.Changed {
		t.Errorf("result = %+v", res)
	}
	if diff := cmp.Diff(want, string(res.Config)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestSnapshotterNameAtLimit: the longest name a snapshotter's state
// directory can carry is written like any other.
func TestSnapshotterNameAtLimit(t *testing.T) {
	name := strings.Repeat("n", 226)
	res, err := Edit(readTestdata(t, "kind-v2.toml"), Change{Snapshotter: name})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(res.Config, []byte(`snapshotter = "`+name+`"`)) {
		t.Errorf("the 226-byte name is not in the config:\n%s", res.Config)
	}
}
