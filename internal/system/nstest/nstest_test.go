package nstest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
)

func TestDiffLines(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"x\ny\n", "x\ny\n", ""},
		{"x\ny\n", "x\nz\n", "- y\n+ z\n"},
		{"x\n", "x\nx\n", "+ x\n"},
		{"x\ny", "y\nx", "(same lines, reordered)\n- \"x\\ny\"\n+ \"y\\nx\"\n"},
	} {
		if got := DiffLines(c.a, c.b); got != c.want {
			t.Errorf("DiffLines(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// TestReachableMounts: a mount covered by another on its mountpoint, and
// every mount below it, is out of reach; the one covering it is not.
func TestReachableMounts(t *testing.T) {
	// As on a machine where /dev/shm and /dev/pts were each mounted twice,
	// and a mount below the first /dev/pts is hidden with it.
	table := `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
26 24 0:24 / /dev/pts rw,relatime - devpts devpts rw
29 26 0:26 / /dev/pts rw,relatime - devpts devpts rw
30 25 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw
31 26 0:28 / /dev/pts/x rw,relatime - tmpfs tmpfs rw
32 29 0:29 / /dev/pts/y rw,relatime - tmpfs tmpfs rw
33 32 0:30 / /dev/pts/y rw,relatime - tmpfs tmpfs rw
`
	mi, err := mountinfo.GetMountsFromReader(strings.NewReader(table), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, m := range reachableMounts(mi) {
		got = append(got, m.ID)
	}
	if want := []int{27, 24, 29, 30, 33}; !slices.Equal(got, want) {
		t.Errorf("reachable mounts %v, want %v", got, want)
	}
}

func TestOthersMount(t *testing.T) {
	for target, want := range map[string]bool{
		"/run/netns":             true, // ip netns add's first bind mount
		"/run/netns/kind-ep-d29": true,
		"/var/lib/kind-entrypoint-docker29/overlay2/abc/merged":    true,
		"/run/kind-entrypoint-docker29/exec/x":                     true,
		"/var/lib/docker/overlay2/x/merged":                        true,
		"/var/lib/dockerx":                                         false,
		"/run/netnsx":                                              false,
		"/sys/fs/cgroup":                                           false,
		"/tmp/x/containerd/io.containerd.runtime.v2.task/k8s.io/y": true,
	} {
		if got := othersMount(target); got != want {
			t.Errorf("othersMount(%q) = %v, want %v", target, got, want)
		}
	}
}

// TestMountsUnchanged: the exit code stays when the tables are as before,
// and a changed table fails the run, whatever the tests' own code, and is
// printed.
func TestMountsUnchanged(t *testing.T) {
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer func(saved *os.File) { os.Stderr = saved }(os.Stderr)
	os.Stderr = stderr
	if got := mountsUnchanged(snapshot(), 3, "these tests"); got != 3 {
		t.Errorf("unchanged tables: code %d, want 3", got)
	}
	for code, want := range map[int]int{0: 1, 2: 2} {
		before := snapshot()
		before[mountTables[1]] += "\n1 1 0:1 / /gone rw - tmpfs tmpfs rw"
		if got := mountsUnchanged(before, code, "these tests"); got != want {
			t.Errorf("a mount gone, code %d: got %d, want %d", code, got, want)
		}
	}
	b, _ := os.ReadFile(stderr.Name())
	want := "FAIL: the machine's mount table changed while these tests ran (- before, + after):\n/proc/1/mountinfo:\n- 1 1 0:1 / /gone rw - tmpfs tmpfs rw\n"
	if string(b) != want+want {
		t.Errorf("printed %q, want twice %q", b, want)
	}
}
