package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContainerdNofileRow: containerd.service's LimitNOFILE as systemd
// would resolve it (unit file, then drop-ins by name), against the
// image's systemd and the host's fs.nr_open (kind #4244).
func TestContainerdNofileRow(t *testing.T) {
	const unit = "etc/systemd/system/containerd.service"
	files := func(kv ...string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			for i := 0; i < len(kv); i += 2 {
				write(t, dir, kv[i], kv[i+1])
			}
		}
	}
	remove := func(p ...string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			for _, q := range p {
				if err := os.Remove(filepath.Join(dir, q)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	both := func(a, b func(t *testing.T, dir string)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) { a(t, dir); b(t, dir) }
	}
	const lib = "usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-257.so"
	runRowCases(t, []rowCase{
		{
			name: "trixie's systemd, before boot", host: "trixie-containerd-nofile",
			want: map[string]string{"containerd-nofile": "warn:^LimitNOFILE=infinity \\(/etc/systemd/system/containerd.service\\), and the image's systemd is 257: systemd 256\\+ raises"},
			exit: ExitWarn,
		},
		{
			name: "a booted trixie node", host: "trixie-containerd-nofile", change: files("proc/sys/fs/nr_open", "1073741816\n"),
			want: map[string]string{"containerd-nofile": "warn:containerd gets fs.nr_open, 1073741816$"},
			exit: ExitWarn,
		},
		{
			name: "bookworm's systemd", host: "trixie-containerd-nofile",
			change: both(remove(lib), files("usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-252.so", "")),
			want:   map[string]string{"containerd-nofile": "pass:fs.nr_open, which the image's systemd is 252 leaves"},
			exit:   ExitPass,
		},
		{
			name: "Fedora's library name", host: "trixie-containerd-nofile",
			change: both(remove(lib), files("usr/lib/systemd/libsystemd-shared-255.4-1.fc40.so", "")),
			want:   map[string]string{"containerd-nofile": "pass:systemd is 255"},
			exit:   ExitPass,
		},
		{
			name: "systemd unknown", host: "trixie-containerd-nofile", change: remove(lib),
			want: map[string]string{"containerd-nofile": "warn:systemd version is unknown: under systemd 256\\+"},
			exit: ExitWarn,
		},
		{
			name: "the fix: a drop-in", host: "trixie-containerd-nofile",
			change: files(unit+".d/nofile.conf", "[Service]\nLimitNOFILE=1048576\n"),
			want:   map[string]string{"containerd-nofile": "pass:^LimitNOFILE=1048576 \\(/etc/systemd/system/containerd.service.d/nofile.conf\\)$"},
			exit:   ExitPass,
		},
		{
			name: "drop-ins by name across directories, the last wins", host: "trixie-containerd-nofile",
			change: files(
				unit+".d/20-a.conf", "[Service]\nLimitNOFILE=65536\n",
				"lib/systemd/system/containerd.service.d/10-b.conf", "[Service]\nLimitNOFILE=1048576\n",
				"lib/systemd/system/containerd.service.d/30-c.conf", "[Service]\nLimitNOFILE=1024:infinity\n",
				"lib/systemd/system/containerd.service.d/20-a.conf", "[Service]\nLimitNOFILE=1\n",
				unit+".d/README", "[Service]\nLimitNOFILE=2\n",
			),
			want: map[string]string{"containerd-nofile": "warn:^LimitNOFILE=1024:infinity \\(/lib/systemd/system/containerd.service.d/30-c.conf\\), and the image's systemd is 257"},
			exit: ExitWarn,
		},
		{
			name: "an empty assignment resets it", host: "trixie-containerd-nofile",
			change: files(unit+".d/nofile.conf", "[Service]\nLimitNOFILE=\n"),
			want:   map[string]string{"containerd-nofile": "pass:not set"},
			exit:   ExitPass,
		},
		{
			name: "a large number", host: "trixie-containerd-nofile",
			change: files(unit+".d/nofile.conf", "[Service]\nLimitNOFILE=1073741816\n"),
			want:   map[string]string{"containerd-nofile": "warn:above 1048576"},
			exit:   ExitWarn,
		},
		{
			name: "another section's LimitNOFILE", host: "trixie-containerd-nofile",
			change: files(unit, "[Unit]\nLimitNOFILE=infinity\n[Service]\nExecStart=/usr/local/bin/containerd\n"),
			want:   map[string]string{"containerd-nofile": "pass:not set"},
			exit:   ExitPass,
		},
		{
			name: "a unit file that cannot be parsed", host: "trixie-containerd-nofile",
			change: files(unit, "[Service\n"+strings.Repeat("x", 3000)),
			want:   map[string]string{"containerd-nofile": "warn:cannot be read: /etc/systemd/system/containerd.service: \""},
			exit:   ExitWarn,
		},
		{
			name: "too many drop-ins", host: "trixie-containerd-nofile",
			change: func(t *testing.T, dir string) {
				for i := range 65 {
					write(t, dir, unit+".d/"+strings.Repeat("a", i+1)+".conf", "")
				}
			},
			want: map[string]string{"containerd-nofile": "warn:65 entries, more than the 64"},
			exit: ExitWarn,
		},
		{
			name: "no unit", host: "docker-v2-cgroupns",
			want: map[string]string{"containerd-nofile": "pass:no containerd.service"},
			exit: ExitPass,
		},
	})
}
