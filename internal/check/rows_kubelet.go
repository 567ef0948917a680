package check

// This file holds the row about the image's kubelet and the host's cgroup
// version (kind PR #4077).

import (
	"fmt"

	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// kubeletCgroup: will the image's kubelet start on this cgroup version?
// Its version is the one fix_cgroup read from the image (the dry run's
// State.Kubelet), never asked of the network or the binary.
func (c *checker) kubeletCgroup() Row {
	const name = "kubelet-cgroup-v1"
	v, err := c.st.Kubelet.Get()
	if c.st.CgroupV2 {
		obs := "cgroup v2: failCgroupV1 does not apply"
		if err == nil {
			obs += " (kubelet " + v.Raw + ")"
		}
		return Row{name, Pass, obs, ""}
	}
	switch {
	case system.NotExist(err):
		return Row{name, Warn, "cgroup v1, and no " + cgroupfix.VersionFile + ": the kubelet's version is unknown",
			fmt.Sprintf("kind's node images record their Kubernetes version there; kubelets 1.%d+ refuse cgroup v1: use cgroup v2 or an older image", cgroupfix.FailCgroupV1Minor)}
	case err != nil:
		return Row{name, Warn, "cgroup v1, and the kubelet's version is unknown: " + err.Error(),
			fmt.Sprintf("%s should hold the image's Kubernetes version (v1.35.0): rebuild the image or fix the file; kubelets 1.%d+ refuse cgroup v1", cgroupfix.VersionFile, cgroupfix.FailCgroupV1Minor)}
	case v.RefusesV1():
		return Row{name, Fail, fmt.Sprintf("cgroup v1, and the image's kubelet is %s (%s)", v.Raw, cgroupfix.VersionFile),
			fmt.Sprintf("kubelets 1.%d+ refuse cgroup v1 (failCgroupV1 defaults to true; kind warns on v1 hosts since v0.32): boot the host with cgroup v2 (systemd.unified_cgroup_hierarchy=1), use a node image older than v1.%d, or set failCgroupV1: false in the kubelet's configuration",
				cgroupfix.FailCgroupV1Minor, cgroupfix.FailCgroupV1Minor)}
	}
	return Row{name, Pass, fmt.Sprintf("cgroup v1; the image's kubelet %s still accepts it (failCgroupV1 defaults to true from 1.%d)", v.Raw, cgroupfix.FailCgroupV1Minor), ""}
}
