package boot

import (
	"context"
	"strconv"

	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/containerd"
	"github.com/kind-entrypoint/entrypoint/internal/mounts"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/proxy"
	"github.com/kind-entrypoint/entrypoint/internal/userns"
)

// Steps is the entrypoint, in the reference script's order; the order
// matters (configure* first, so nothing reads the configs half-made).
// A step's exit code is 10 + its position.
func Steps() []Step {
	steps := []Step{
		{Name: "validate_userns", Plan: validateUserNS},
		{Name: "configure_containerd", Plan: configureContainerd},
		{Name: "configure_proxy", Plan: configureProxy},
		{Name: "fix_mount", Plan: fixMount},
		{Name: "fix_cgroup", Plan: fixCgroup},
	}
	for i := range steps {
		steps[i].Code = 11 + i
	}
	return steps
}

func validateUserNS(_ context.Context, h *Host) ([]Fact, []plan.Action, error) {
	if !h.UserNS {
		return nil, nil, nil
	}
	f, err := userns.Detect(h.Sys, h.CgroupV2)
	if err != nil {
		return nil, nil, err
	}
	facts := []Fact{{"RLIMIT_NOFILE hard", strconv.FormatUint(f.NofileHard, 10)}}
	if h.CgroupV2 {
		facts = append(facts, Fact{"cgroup controllers", f.Controllers})
	}
	actions, err := userns.Plan(f)
	return facts, actions, err
}

func configureContainerd(_ context.Context, h *Host) ([]Fact, []plan.Action, error) {
	f, err := containerd.Detect(h.Sys, h.Getenv, h.UserNS)
	if err != nil {
		return nil, nil, err
	}
	facts := []Fact{
		{"filesystem of /kind", f.KindFSType},
		{"snapshotter", f.Snapshotter + " (" + f.SnapshotterSource + ")"},
	}
	actions, err := containerd.Plan(f)
	return facts, actions, err
}

func configureProxy(_ context.Context, h *Host) ([]Fact, []plan.Action, error) {
	f, err := proxy.Detect(h.Sys, h.LookupEnv)
	if err != nil {
		return nil, nil, err
	}
	actions, err := proxy.Plan(f)
	return nil, actions, err
}

func fixMount(_ context.Context, h *Host) ([]Fact, []plan.Action, error) {
	f, err := mounts.Detect(h.Sys, h.Getenv("PATH"))
	if err != nil {
		return nil, nil, err
	}
	facts := []Fact{{"mount binaries", f.Describe()}, {"/sys", f.Sys.Options}}
	return facts, mounts.Plan(f), nil
}

func fixCgroup(_ context.Context, h *Host) ([]Fact, []plan.Action, error) {
	if h.CgroupV2 {
		return nil, cgroupfix.PlanV2(), nil
	}
	f, err := cgroupfix.DetectV1(h.Sys)
	if err != nil {
		return nil, nil, err
	}
	facts := []Fact{{"current cgroup", f.Current}, {"cgroupns", strconv.FormatBool(f.Current == "/")}}
	actions, err := cgroupfix.PlanV1(f)
	return facts, actions, err
}
