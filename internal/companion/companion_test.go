package companion

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// run plans and applies a command on tree, and plans it again.
func run(t *testing.T, tree *system.Tree, name, stdin string) (first, again []plan.Action, logs string, err error) {
	t.Helper()
	cmd, ok := Lookup(name)
	if !ok {
		t.Fatalf("no command %s", name)
	}
	h, err := boot.Detect(tree, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	results, err := boot.DryRun(ctx, h, cmd.Steps(strings.NewReader(stdin)))
	if err != nil {
		return nil, nil, "", err
	}
	first = results[0].Actions
	var buf bytes.Buffer
	if err := boot.Run(ctx, h, cmd.Steps(strings.NewReader(stdin)), logline.New(&buf, logline.Text)); err != nil {
		return first, nil, buf.String(), err
	}
	results, err = boot.DryRun(ctx, h, cmd.Steps(strings.NewReader(stdin)))
	if err != nil {
		t.Fatalf("planning again: %v", err)
	}
	if len(tree.Ran()) != 0 {
		t.Errorf("%s started programs: %q", name, tree.Ran())
	}
	return first, results[0].Actions, buf.String(), nil
}

const mountinfoV1 = "1 0 0:1 / / rw,relatime - overlay overlay rw\n" +
	"2 1 0:2 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n" +
	"3 2 0:1 /kind/fake-cgroups /proc/cgroups rw,relatime - overlay overlay rw\n"

func TestUndoMountHacks(t *testing.T) {
	tree := hosttest.Tree(t, map[string]string{
		"proc/self/mountinfo": mountinfoV1,
		"proc/cgroups":        "#subsys_name\thierarchy\tnum_cgroups\tenabled\n",
		"kind/fake-cgroups":   "#subsys_name\thierarchy\tnum_cgroups\tenabled\n",
	})
	first, again, _, err := run(t, tree, "undo-mount-hacks", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"umount /proc/cgroups [on failure: ignore]  # systemd has read the fake; show the real one"}
	if diff := cmp.Diff(want, plan.Strings(first)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(again) != 0 {
		t.Errorf("after the unmount: %q", plan.Strings(again))
	}

	v2 := hosttest.Tree(t, map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n", "proc/self/mountinfo": mountinfoV1})
	if first, _, _, err := run(t, v2, "undo-mount-hacks", ""); err != nil || len(first) != 0 {
		t.Errorf("cgroup v2: %q, %v; want nothing", plan.Strings(first), err)
	}
}

func TestCreateKubeletCgroupV2(t *testing.T) {
	tree := hosttest.Tree(t, map[string]string{
		"sys/fs/cgroup/cgroup.controllers":     "cpuset cpu io memory hugetlb pids rdma misc\n",
		"sys/fs/cgroup/cgroup.procs":           "",
		"sys/fs/cgroup/cgroup.subtree_control": "cpuset cpu io memory pids\n",
		"sys/fs/cgroup/kubelet.slice/":         "",
	})
	first, again, _, err := run(t, tree, "create-kubelet-cgroup-v2", "")
	if err != nil {
		t.Fatal(err)
	}
	all := `"+cpuset +cpu +io +memory +hugetlb +pids +rdma +misc"`
	want := []string{
		"write-in-place /sys/fs/cgroup/cgroup.subtree_control " + all,
		"mkdir /sys/fs/cgroup/kubelet 0755",
		"write-in-place /sys/fs/cgroup/kubelet/cgroup.subtree_control " + all,
		"write-in-place /sys/fs/cgroup/kubelet.slice/cgroup.subtree_control " + all,
	}
	if diff := cmp.Diff(want, plan.Strings(first)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The fake's subtree_control now reads "+cpuset ...": not the
	// kernel's form, so only the mkdir is expected to be gone.
	for _, a := range again {
		if a.Op == plan.OpMkdir {
			t.Errorf("after applying: %s", a)
		}
	}

	busy := hosttest.Tree(t, map[string]string{
		"sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
		"sys/fs/cgroup/cgroup.procs":       "1\n57\n",
	})
	if _, _, _, err := run(t, busy, "create-kubelet-cgroup-v2", ""); err == nil || !strings.Contains(err.Error(), "PIDs 1, 57") {
		t.Errorf("processes in the root cgroup: %v", err)
	}
	v1 := hosttest.Tree(t, map[string]string{"proc/self/mountinfo": mountinfoV1})
	_, _, _, err = run(t, v1, "create-kubelet-cgroup-v2", "")
	if err == nil || !strings.Contains(err.Error(), "cgroup v2 only") {
		t.Errorf("cgroup v1: %v", err)
	}
	if code := boot.ExitCode(err); code != ExitCode {
		t.Errorf("exit code %d, want %d", code, ExitCode)
	}
}

const bundle = "/run/containerd/io.containerd.runtime.v2.task/k8s.io/4f1c"

func TestMountProductFiles(t *testing.T) {
	mi := "1 0 0:1 / / rw,relatime - overlay overlay rw\n" +
		"2 1 0:9 / " + bundle + "/rootfs rw,nosuid,relatime - overlay overlay rw\n" +
		"3 2 0:2 / " + bundle + "/rootfs/sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs rw\n"
	tree := hosttest.Tree(t, map[string]string{
		"proc/self/mountinfo":                            mi,
		"sys/fs/cgroup/cgroup.controllers":               "cpu memory\n",
		"kind/product_name":                              "kind\n",
		"kind/product_uuid":                              "0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a50\n",
		"kind/product_other":                             "x\n",
		"sys/class/dmi/id/product_name":                  "KVM\n",
		"sys/class/dmi/id/product_uuid":                  "7a3e0c52-1f4d-4d8b-9b6e-2c1d5e8f9a40\n",
		"sys/devices/virtual/dmi/id/product_uuid":        "7a3e0c52-1f4d-4d8b-9b6e-2c1d5e8f9a40\n",
		bundle + "/rootfs/sys/class/dmi/id/product_name": "KVM\n",
		bundle + "/rootfs/sys/class/dmi/id/product_uuid": "7a3e0c52-1f4d-4d8b-9b6e-2c1d5e8f9a40\n",
		// The container has no virtual DMI directory: warned, not fatal.
	})
	state := `{"ociVersion":"1.0.2","id":"4f1c","status":"creating","pid":4242,"bundle":"` + bundle + `"}`
	first, _, logs, err := run(t, tree, "mount-product-files", state)
	if err != nil {
		t.Fatal(err)
	}
	r := bundle + "/rootfs"
	want := []string{
		`write ` + r + `/product_name 0644 "kind\n"`,
		`write ` + r + `/product_other 0644 "x\n"`,
		`write ` + r + `/product_uuid 0644 "0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a50\n"`,
		"mount " + r + "/product_name on " + r + "/sys/class/dmi/id/product_name (bind)",
		"mount none on " + r + "/sys/class/dmi/id/product_name (remount,bind,ro,nosuid,relatime)",
		"mount " + r + "/product_uuid on " + r + "/sys/class/dmi/id/product_uuid (bind)",
		"mount none on " + r + "/sys/class/dmi/id/product_uuid (remount,bind,ro,nosuid,relatime)",
		"log WARN: not hiding /sys/devices/virtual/dmi/id/product_uuid in the container: stat " + r + "/sys/devices/virtual/dmi/id/product_uuid: no such file or directory",
	}
	if diff := cmp.Diff(want, plan.Strings(first)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(logs, "WARN: not hiding /sys/devices/virtual/dmi/id/product_uuid") {
		t.Errorf("log %q", logs)
	}
	if b, _ := tree.ReadFile(r+"/sys/class/dmi/id/product_uuid", system.LimitTable); string(b) != "0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a50\n" {
		t.Errorf("the container reads product_uuid %q", b)
	}
}

func TestParseState(t *testing.T) {
	for in, want := range map[string]string{
		`{"bundle":"/b/c/"}`: "/b/c",
		`{"bundle":""}`:      "error: no bundle",
		`{}`:                 "error: no bundle",
		`{"bundle":"rel"}`:   `error: bundle "rel" is not an absolute directory`,
		`{"bundle":"/"}`:     `error: bundle "/" is not an absolute directory`,
		`garbage`:            "error: invalid character",
		``:                   "error: EOF",
		// The error quotes 80 bytes of a value of any length.
		`{"bundle":"` + strings.Repeat("r", 100000) + `"}`: `error: bundle "` + strings.Repeat("r", 80) + `"... is not an absolute directory`,
	} {
		got, err := ParseState(strings.NewReader(in))
		if err != nil {
			got = "error: " + strings.TrimPrefix(err.Error(), "container state on stdin: ")
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("ParseState(%q) = %q, want %q", in, got, want)
		}
	}
}
