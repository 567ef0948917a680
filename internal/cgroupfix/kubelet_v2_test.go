package cgroupfix

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

func TestPlanKubeletCgroupKernelForm(t *testing.T) {
	// The kernel lists enabled controllers without '+'.
	f := KubeletCgroupFacts{
		Controllers: []string{"cpu", "memory"},
		Exists:      map[string]bool{"/": true, "/kubelet": true, "/kubelet.slice": true},
		Enabled:     map[string][]string{"/": {"cpu", "memory"}, "/kubelet": {"cpu", "memory"}, "/kubelet.slice": {"cpu"}},
	}
	actions, err := PlanKubeletCgroup(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`write-in-place /sys/fs/cgroup/kubelet.slice/cgroup.subtree_control "+cpu +memory"`}
	if diff := cmp.Diff(want, plan.Strings(actions)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestPlanKubeletCgroupNoControllers: as the script (whose write of
// nothing succeeds), the kubelet's cgroups are made even when there is no
// controller to enable: the kubelet refuses to start without its
// cgroup-root.
func TestPlanKubeletCgroupNoControllers(t *testing.T) {
	f := KubeletCgroupFacts{Exists: map[string]bool{"/": true}, Enabled: map[string][]string{"/": nil}}
	actions, err := PlanKubeletCgroup(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"log WARN: /sys/fs/cgroup/cgroup.controllers lists no controller; nothing to delegate",
		"mkdir /sys/fs/cgroup/kubelet 0755",
		"mkdir /sys/fs/cgroup/kubelet.slice 0755",
	}
	if diff := cmp.Diff(want, plan.Strings(actions)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestPlanKubeletCgroupManyProcs: the error names the root cgroup's
// processes, a few of them: a busy root cgroup (a megabyte of PIDs) must
// not make an ERROR line of a megabyte.
func TestPlanKubeletCgroupManyProcs(t *testing.T) {
	f := KubeletCgroupFacts{Controllers: []string{"cpu"}}
	for i := 1; i <= 100000; i++ {
		f.Procs = append(f.Procs, strconv.Itoa(i))
	}
	_, err := PlanKubeletCgroup(f)
	if err == nil || len(err.Error()) > 400 || !strings.Contains(err.Error(), "PIDs 1, 2, 3") || !strings.Contains(err.Error(), "100000 in all") {
		t.Errorf("%d bytes of error: %.300v", len(fmt.Sprint(err)), err)
	}
	f.Procs = []string{"1", "57"}
	if _, err := PlanKubeletCgroup(f); err == nil || !strings.Contains(err.Error(), "(PIDs 1, 57)") {
		t.Errorf("two processes: %v", err)
	}
}
