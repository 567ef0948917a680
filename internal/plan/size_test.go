package plan

import (
	"testing"
	"time"
	"unsafe"
)

// TestActionSize: a plan of a host with 150k cgroup mounts holds 600k
// actions, so every byte of an Action is 600 kB of it. The fields of runs
// and rollbacks live in Extra (an Action was 296 bytes, 178 MB
// for that plan).
func TestActionSize(t *testing.T) {
	if n := unsafe.Sizeof(Action{}); n > 184 {
		t.Errorf("an Action is %d bytes; want at most 184", n)
	}
	if n := testing.AllocsPerRun(10, func() { _ = Mkdir("/sys/fs/cgroup/x/kubelet", 0o755) }); n != 0 {
		t.Errorf("a mkdir allocates %v times; want 0", n)
	}
}

// TestExtraNotShared: a copy of an action changed by WithRollback,
// WithoutStdout or Creating leaves the original as it was, though both
// point at an Extra.
func TestExtraNotShared(t *testing.T) {
	run := Run([]string{"kubeadm"}, nil, time.Second)
	want := run.String()
	_ = run.WithRollback(Remove("/x"))
	_ = run.WithoutStdout()
	_ = run.Creating("/y")
	if got := run.String(); got != want {
		t.Errorf("the original run became %q; want %q", got, want)
	}
	if x := Remove("/x").Extras(); x.Rollback != nil || x.Argv != nil {
		t.Errorf("a remove has extras %+v", x)
	}
}
