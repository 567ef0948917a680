//go:build cluster && vm

package cluster

import (
	"os"
	"strconv"
	"testing"
)

// TestVMOneNode is the VM tier's cluster suite (test/vm/guest/cluster.sh,
// make e2e-vm-cluster): in a Debian VM with cgroup v2, under QEMU's
// emulation, the kind CLI (CLUSTER_KIND) creates one control plane from
// CLUSTER_IMAGE, with the daemon DOCKER_HOST names (root or rootless
// Docker), and the checks of TestOlderKind run: the node Ready, every
// kube-system pod Running and ready, and a pod resolving the kubernetes
// service's name and the node container's name (Docker's embedded DNS).
//
// CLUSTER_TIME_SCALE stretches every time limit, and kubeadm gets the same
// stretch for the control plane to come up: under emulation the API server
// takes minutes where it takes seconds on the host.
func TestVMOneNode(t *testing.T) {
	slow, err := strconv.Atoi(os.Getenv("CLUSTER_TIME_SCALE"))
	if err != nil || slow < 1 {
		t.Fatalf("CLUSTER_TIME_SCALE=%q: want a whole number from 1", os.Getenv("CLUSTER_TIME_SCALE"))
	}
	// kind v0.30.0 writes kubeadm's v1beta3 config for Kubernetes 1.34,
	// where this is the wait for the control plane's static pods (4m by
	// default), which kubeadm 1.34 takes as its
	// controlPlaneComponentHealthCheck.
	patch := "kind: ClusterConfiguration\napiServer:\n  timeoutForControlPlane: " + strconv.Itoa(4*slow) + "m0s\n"
	c := createCluster(t, spec{tag: "vm", image: mustEnv(t, envImage), kind: mustEnv(t, envKind),
		slow: slow, kubeadmPatches: []string{patch}})
	c.checkAll(t, "created")
}
