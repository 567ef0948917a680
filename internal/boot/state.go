package boot

// This file holds State: the one typed record of what a run detected.

import (
	"errors"

	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/containerd"
	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/identity"
	"github.com/kind-entrypoint/entrypoint/internal/mounts"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/proxy"
	"github.com/kind-entrypoint/entrypoint/internal/userns"
)

// State is what a run detected: the facts every step needs (Detect), then
// a field per step, in the order of Steps, each filled by its step when
// the run reaches it. A later step reads an earlier one's facts here
// (enable_network_magic the backend select_iptables chose), and the dry
// run's readers (check, capture, the companions) read its fields: nothing
// is detected twice in a run, so the plan and check cannot disagree.
type State struct {
	// UserNS: running in a user namespace (rootless).
	UserNS bool
	// CgroupV2: the unified hierarchy is mounted at /sys/fs/cgroup.
	CgroupV2 bool

	Rootless    Found[userns.Facts]              // validate_userns, in a user namespace
	Containerd  Found[containerd.Facts]          // configure_containerd
	Proxy       Found[proxy.Facts]               // configure_proxy
	Mounts      Found[mounts.Facts]              // fix_mount
	CgroupV1    Found[cgroupfix.V1Facts]         // fix_cgroup, on cgroup v1
	Kubelet     Found[cgroupfix.KubeletVersion]  // fix_cgroup: the image's /kind/version
	MachineID   Found[identity.MachineIDFacts]   // fix_machine_id
	ProductName Found[identity.ProductNameFacts] // fix_product_name
	ProductUUID Found[identity.ProductUUIDFacts] // fix_product_uuid
	Iptables    Found[network.IptablesFacts]     // select_iptables
	Magic       Found[network.MagicFacts]        // enable_network_magic
	// Peers is etcd's membership (kind#1689), which enable_network_magic
	// reads once it knows the node's name (Magic).
	Peers Found[etcdpeers.Facts]
}

// newRun is s for a new run: the shared facts kept, no step's.
func (s State) newRun() State { return State{UserNS: s.UserNS, CgroupV2: s.CgroupV2} }

// Found is what one step's Detect returned: its facts, or the error it
// failed with (then no facts). A zero Found is a step that detected
// nothing: the run did not reach it, or there was nothing to detect on
// this host.
type Found[T any] struct {
	Facts T
	Err   error
	ok    bool
}

// found is Detect's answer as a Found.
func found[T any](f T, err error) Found[T] {
	if err != nil {
		return Found[T]{Err: err}
	}
	return Found[T]{Facts: f, ok: true}
}

// errNotDetected is Get's error for a step that detected nothing.
var errNotDetected = errors.New("not detected: the step did not run, or had nothing to detect")

// Get is the facts, or why there are none.
func (f Found[T]) Get() (T, error) {
	switch {
	case f.ok:
		return f.Facts, nil
	case f.Err != nil:
		return f.Facts, f.Err
	}
	return f.Facts, errNotDetected
}
