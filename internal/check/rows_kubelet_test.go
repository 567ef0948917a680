package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubeletCgroupRow: the image's kubelet against the host's cgroup
// version (kind PR #4077), its version read from /kind/version only.
func TestKubeletCgroupRow(t *testing.T) {
	version := func(v string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) { write(t, dir, "kind/version", v) }
	}
	runRowCases(t, []rowCase{
		{
			name: "kubelet 1.35 on cgroup v1", host: "v1-kubelet-1.35",
			want: map[string]string{
				"kubelet-cgroup-v1": "fail:cgroup v1, and the image's kubelet is v1.35.0 \\(/kind/version\\)",
				"plan":              "warn:fix_cgroup: WARN: the kubelet of this image \\(v1.35.0, from /kind/version\\) refuses cgroup v1",
			},
			exit: ExitFail,
		},
		{
			name: "a pre-release of 1.36 on cgroup v1", host: "docker-v1-cgroupns", change: version("v1.36.0-alpha.0.123+0123abcd\n"),
			want: map[string]string{"kubelet-cgroup-v1": "fail:v1.36.0-alpha.0.123\\+0123abcd"},
			exit: ExitFail,
		},
		{
			name: "kubelet 1.34 on cgroup v1", host: "docker-v1-cgroupns", change: version("v1.34.2\n"),
			want: map[string]string{"kubelet-cgroup-v1": "pass:v1.34.2 still accepts it", "plan": "pass"},
			exit: ExitWarn, // cgroup-version warns on v1
		},
		{
			name: "kubelet 1.35 on cgroup v2", host: "docker-v2-cgroupns", change: version("v1.35.0\n"),
			want: map[string]string{"kubelet-cgroup-v1": "pass:cgroup v2: failCgroupV1 does not apply \\(kubelet v1.35.0\\)"},
			exit: ExitPass,
		},
		{
			name: "garbage version on cgroup v1", host: "docker-v1-cgroupns", change: version(strings.Repeat("\x00garbage", 400)),
			want: map[string]string{"kubelet-cgroup-v1": "warn:version is unknown: /kind/version: \"\\\\x00garbage.*\\.\\.\\. is not a Kubernetes version", "plan": "pass"},
			exit: ExitWarn,
		},
		{
			name: "version past the read limit on cgroup v1", host: "docker-v1-cgroupns", change: version("v1.35.0" + strings.Repeat(" ", 5000)),
			want: map[string]string{"kubelet-cgroup-v1": "warn:version is unknown: /kind/version: more than the 4096-byte limit"},
			exit: ExitWarn,
		},
		{
			name: "no /kind/version on cgroup v1", host: "docker-v1-cgroupns",
			change: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "kind/version")) },
			want:   map[string]string{"kubelet-cgroup-v1": "warn:no /kind/version"},
			exit:   ExitWarn,
		},
		{
			name: "garbage version on cgroup v2", host: "docker-v2-cgroupns", change: version("latest\n"),
			want: map[string]string{"kubelet-cgroup-v1": "pass:^cgroup v2: failCgroupV1 does not apply$"},
			exit: ExitPass,
		},
	})
}
