package e2e

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMountinfo(t *testing.T) {
	in := `76 52 0:39 / / rw,relatime shared:3 master:2 - overlay overlay rw,lowerdir=/a:/b
80 76 0:45 / /sys ro,nosuid,nodev,noexec,relatime shared:10 - sysfs sysfs rw
54 82 0:29 /kubelet /sys/fs/cgroup/cpu/kubelet rw,nosuid - cgroup cgroup rw,cpu
97 76 254:0 /x\040y /etc/with\040space rw - ext4 /dev/vda rw
`
	got, err := parseMountinfo(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []mountInfo{
		{ID: 76, Parent: 52, Root: "/", MountPoint: "/", Options: "rw,relatime", Optional: []string{"shared:3", "master:2"}, FSType: "overlay", Source: "overlay", SuperOptions: "rw,lowerdir=/a:/b"},
		{ID: 80, Parent: 76, Root: "/", MountPoint: "/sys", Options: "ro,nosuid,nodev,noexec,relatime", Optional: []string{"shared:10"}, FSType: "sysfs", Source: "sysfs", SuperOptions: "rw"},
		{ID: 54, Parent: 82, Root: "/kubelet", MountPoint: "/sys/fs/cgroup/cpu/kubelet", Options: "rw,nosuid", Optional: []string{}, FSType: "cgroup", Source: "cgroup", SuperOptions: "rw,cpu"},
		{ID: 97, Parent: 76, Root: "/x y", MountPoint: "/etc/with space", Options: "rw", Optional: []string{}, FSType: "ext4", Source: "/dev/vda", SuperOptions: "rw"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseMountinfo (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"1 2 3", "x 2 0:1 / / rw - a b c", "1 2 0:1 / / rw shared:1 a b c"} {
		if _, err := parseMountinfo(bad); err == nil {
			t.Errorf("parseMountinfo(%q): no error", bad)
		}
	}
	if !hasOption("ro,nosuid", "ro") || hasOption("rw,nosuid", "ro") || hasOption("rootcontext=x", "ro") {
		t.Error("hasOption")
	}
}

func TestParseShowEnvironment(t *testing.T) {
	// The FOO line is what systemd 252 printed for
	// `systemctl set-environment 'FOO=a b"c\d%e$f'"'"'g'`.
	in := "LANG=C.UTF-8\n" +
		"EMPTY=\n" +
		`FOO=$'a b"c\\d%e$f\'g'` + "\n" +
		`CTL=$'tab\there\nnl\x01'` + "\n" +
		`SQ='it is'` + "\n" +
		`DQ="say \"hi\" \\ \$HOME"` + "\n"
	got, err := parseShowEnvironment(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"LANG":  "C.UTF-8",
		"EMPTY": "",
		"FOO":   `a b"c\d%e$f'g`,
		"CTL":   "tab\there\nnl\x01",
		"SQ":    "it is",
		"DQ":    `say "hi" \ $HOME`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseShowEnvironment (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"NOEQUALS", "=x", "A=$'open", "A='open", `A="open`} {
		if _, err := parseShowEnvironment(bad); err == nil {
			t.Errorf("parseShowEnvironment(%q): no error", bad)
		}
	}
}
