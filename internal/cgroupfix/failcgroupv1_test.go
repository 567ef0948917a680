package cgroupfix

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

var kubeletVersionTests = []struct {
	in      string
	want    KubeletVersion
	refuses bool
	err     string
}{
	{in: "v1.35.0\n", want: KubeletVersion{"v1.35.0", 1, 35, 0}, refuses: true},
	{in: "v1.34.12", want: KubeletVersion{"v1.34.12", 1, 34, 12}},
	{in: "1.35.1\n", want: KubeletVersion{"1.35.1", 1, 35, 1}, refuses: true},
	{in: "v1.36.0-alpha.0.877+0d3e1ad7c4f1a2\n", want: KubeletVersion{"v1.36.0-alpha.0.877+0d3e1ad7c4f1a2", 1, 36, 0}, refuses: true},
	{in: "v1.30.0", want: KubeletVersion{"v1.30.0", 1, 30, 0}},
	{in: "v2.0.0", want: KubeletVersion{"v2.0.0", 2, 0, 0}, refuses: true},
	{in: "", err: `"" is not a Kubernetes version (vMAJOR.MINOR.PATCH): 1 numbers, not 3`},
	{in: "latest\n", err: `"latest" is not a Kubernetes version (vMAJOR.MINOR.PATCH): 1 numbers, not 3`},
	{in: "v1.35\n", err: "2 numbers, not 3"},
	{in: "v1.35.0\n\n", err: "a number with a character that is not a digit"},
	{in: " v1.35.0", err: "a number with a character that is not a digit"},
	{in: "v1.35.0-", err: "nothing after -"},
	{in: "v1.35.0-rc 1", err: "a character outside"},
	{in: "v1.035.0", err: "leading zero"},
	{in: "v1..0", err: "an empty number"},
	{in: "v1.9999999.0", err: "more than 6 digits"},
	{in: "v1.35.0\x00", err: `"v1.35.0\x00"`},
	{in: strings.Repeat("9", 300), err: `"` + strings.Repeat("9", 80) + `"...`},
}

func TestParseKubeletVersion(t *testing.T) {
	for _, tt := range kubeletVersionTests {
		got, err := ParseKubeletVersion(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseKubeletVersion(%q) = %+v, %v; want an error with %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want || got.RefusesV1() != tt.refuses {
			t.Errorf("ParseKubeletVersion(%q) = %+v (refuses v1: %v), %v; want %+v (refuses: %v)", tt.in, got, got.RefusesV1(), err, tt.want, tt.refuses)
		}
	}
}

// TestRefusesV1Warning: only a kubelet that refuses cgroup v1 has a line,
// and it names failCgroupV1, the version and where it was read.
func TestRefusesV1Warning(t *testing.T) {
	if _, ok := RefusesV1Warning(KubeletVersion{"v1.34.9", 1, 34, 9}); ok {
		t.Error("a warning for 1.34")
	}
	w, ok := RefusesV1Warning(KubeletVersion{"v1.35.0", 1, 35, 0})
	if !ok || w.Level != logline.Warn {
		t.Fatalf("%v, %v: want a WARN", w, ok)
	}
	for _, s := range []string{"failCgroupV1", "v1.35.0", VersionFile, "cgroup v2"} {
		if !strings.Contains(string(w.Data), s) {
			t.Errorf("%q does not name %s", w.Data, s)
		}
	}
}

// TestReadKubeletVersion: missing, too large, garbage, and a version.
func TestReadKubeletVersion(t *testing.T) {
	for _, tt := range []struct {
		files map[string]string
		want  string
		err   string
	}{
		{files: map[string]string{"kind/version": "v1.35.0\n"}, want: "v1.35.0"},
		{files: map[string]string{"etc/x": ""}, err: "no such file"},
		{files: map[string]string{"kind/version": strings.Repeat("v", 5000)}, err: "limit"},
		{files: map[string]string{"kind/version": "garbage"}, err: VersionFile + `: "garbage" is not a Kubernetes version`},
	} {
		v, err := ReadKubeletVersion(hosttest.Tree(t, tt.files))
		if got := fmt.Sprint(v.Raw, hosttest.ErrString(err)); tt.err != "" && !strings.Contains(got, tt.err) || tt.err == "" && v.Raw != tt.want {
			t.Errorf("%v: %q, %v; want %q %q", tt.files, v.Raw, err, tt.want, tt.err)
		}
	}
}

// FuzzKubeletVersion: any /kind/version gives a clear error or a version
// whose numbers are those of its text, bounded.
func FuzzKubeletVersion(f *testing.F) {
	for _, tt := range kubeletVersionTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		v, err := ParseKubeletVersion(in)
		if err != nil {
			if v != (KubeletVersion{}) {
				t.Fatalf("%q: %+v with error %v", in, v, err)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("%q: an error of %d bytes", in, len(err.Error()))
			}
			return
		}
		if v.Raw != strings.TrimSuffix(in, "\n") || strings.ContainsAny(v.Raw, "\n\x00 ") {
			t.Fatalf("%q: Raw %q", in, v.Raw)
		}
		core := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
		if !strings.HasPrefix(strings.TrimPrefix(v.Raw, "v"), core) || v.Minor > 999999 {
			t.Fatalf("%q: %+v", in, v)
		}
	})
}
