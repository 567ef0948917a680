package check

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInotifyRow: the host's inotify limits against kind's recommended
// ones (known issues, "too many open files").
func TestInotifyRow(t *testing.T) {
	limits := func(instances, watches string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			write(t, dir, "proc/sys/fs/inotify/max_user_instances", instances)
			write(t, dir, "proc/sys/fs/inotify/max_user_watches", watches)
		}
	}
	runRowCases(t, []rowCase{
		{
			name: "the kernel's defaults", host: "host-inotify-low",
			want: map[string]string{
				"inotify": "warn:^fs.inotify.max_user_instances=128; fs.inotify.max_user_watches=8192; fs.inotify.max_user_instances below 512, fs.inotify.max_user_watches below 524288$",
				"plan":    "pass",
			},
			exit: ExitWarn,
		},
		{
			name: "kind's values", host: "host-inotify-low", change: limits("512\n", "524288\n"),
			want: map[string]string{"inotify": "pass:^fs.inotify.max_user_instances=512; fs.inotify.max_user_watches=524288$"},
			exit: ExitPass,
		},
		{
			name: "only the watches low", host: "host-inotify-low", change: limits("8192\n", "65536\n"),
			want: map[string]string{"inotify": "warn:; fs.inotify.max_user_watches below 524288$"},
			exit: ExitWarn,
		},
		{
			name: "garbage", host: "host-inotify-low", change: limits("lots\n", "524288\n"),
			want: map[string]string{"inotify": "warn:cannot be read: /proc/sys/fs/inotify/max_user_instances: strconv.ParseUint: parsing \"lots\": invalid syntax"},
			exit: ExitWarn,
		},
		{
			name: "negative", host: "host-inotify-low", change: limits("-1\n", "524288\n"),
			want: map[string]string{"inotify": "warn:cannot be read"},
			exit: ExitWarn,
		},
		{
			name: "not a file", host: "host-inotify-low",
			change: func(t *testing.T, dir string) {
				os.Remove(filepath.Join(dir, "proc/sys/fs/inotify/max_user_watches"))
				write(t, dir, "proc/sys/fs/inotify/max_user_watches/x", "")
			},
			want: map[string]string{"inotify": "warn:cannot be read: /proc/sys/fs/inotify/max_user_watches: not a regular file"},
			exit: ExitWarn,
		},
		{
			name: "one missing", host: "host-inotify-low",
			change: func(t *testing.T, dir string) {
				limits("1024\n", "1048576\n")(t, dir)
				os.Remove(filepath.Join(dir, "proc/sys/fs/inotify/max_user_watches"))
			},
			want: map[string]string{"inotify": "pass:^fs.inotify.max_user_instances=1024; not known: no /proc/sys/fs/inotify/max_user_watches$"},
			exit: ExitPass,
		},
		{
			name: "a host captured without them", host: "docker-v2-cgroupns",
			want: map[string]string{"inotify": "pass:^not known: no /proc/sys/fs/inotify/max_user_instances, no /proc/sys/fs/inotify/max_user_watches$"},
			exit: ExitPass,
		},
	})
}

// TestKeysRow: the kernel key quota only matters to a rootless node.
func TestKeysRow(t *testing.T) {
	maxkeys := func(v string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) { write(t, dir, "proc/sys/kernel/keys/maxkeys", v) }
	}
	runRowCases(t, []rowCase{
		{
			name: "rootful, the kernel's default", host: "docker-v2-cgroupns", change: maxkeys("200\n"),
			want: map[string]string{"keys-maxkeys": "pass:not rootless"},
			exit: ExitPass,
		},
		{
			name: "rootless, the kernel's default", host: "rootless-v2-delegated", change: maxkeys("200\n"),
			want: map[string]string{"keys-maxkeys": "warn:^kernel.keys.maxkeys=200; kernel.keys.maxkeys below 20000$"},
			exit: ExitWarn,
		},
		{
			name: "rootless, kind #3806's value", host: "rootless-v2-delegated", change: maxkeys("20000\n"),
			want: map[string]string{"keys-maxkeys": "pass:^kernel.keys.maxkeys=20000$"},
			exit: ExitPass,
		},
		{
			name: "rootless, garbage", host: "rootless-v2-delegated", change: maxkeys("20000 \n"),
			want: map[string]string{"keys-maxkeys": "warn:cannot be read: /proc/sys/kernel/keys/maxkeys"},
			exit: ExitWarn,
		},
	})
}
