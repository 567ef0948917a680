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
// CLUSTER_TIME_SCALE stretches every time limit of the test, and the same
// factor goes on the limits of Kubernetes itself that the VM met (kubeadm's
// wait for the control plane, leader election, etcd's request limit, the
// kubelet's runtime calls): under emulation the API server takes minutes
// where it takes seconds on the host.
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
	// The controller manager and the scheduler exit when they cannot renew
	// their leader lease within the renew deadline (10s of a 15s lease,
	// retried every 2s), and kubeadm init waits for both to be healthy.
	// Under emulation the API server and etcd can answer that slowly: in a
	// rootless Docker run both crash-looped through most of a 35-minute
	// kubeadm init. They get the same stretch as every other limit.
	for _, component := range []string{"controllerManager", "scheduler"} {
		patch += component + ":\n  extraArgs:\n" +
			"    leader-elect-lease-duration: " + strconv.Itoa(15*slow) + "s\n" +
			"    leader-elect-renew-deadline: " + strconv.Itoa(10*slow) + "s\n" +
			"    leader-elect-retry-period: " + strconv.Itoa(2*slow) + "s\n"
	}
	// etcd fails a request it cannot commit within 5s plus two election
	// timeouts (1s each by default): under emulation and rootless Docker,
	// fdatasync took up to 2.9s and requests up to 6.8s, and kind's
	// `kubectl apply` of the default storage class failed with "etcdserver:
	// request timed out". One member: a longer election timeout (with the
	// heartbeat at its usual tenth of it) changes nothing else.
	patch += "etcd:\n  local:\n    extraArgs:\n" +
		"      heartbeat-interval: \"" + strconv.Itoa(100*slow) + "\"\n" +
		"      election-timeout: \"" + strconv.Itoa(1000*slow) + "\"\n"
	// The kubelet cancels a runtime call after 2m. The node image imports
	// its images without unpacking them (kind-preload-images.service), so
	// the first container of an image unpacks it inside CreateContainer
	// (containerd's CRI does that when the snapshot is missing); under
	// rootless Docker and emulation, kube-proxy's and the CNI's took longer,
	// and every retry started over ("CreateContainerError: context deadline
	// exceeded" until kind's limit).
	kubelet := "kind: KubeletConfiguration\nruntimeRequestTimeout: " + strconv.Itoa(2*slow) + "m0s\n"
	c := createCluster(t, spec{tag: "vm", image: mustEnv(t, envImage), kind: mustEnv(t, envKind),
		slow: slow, kubeadmPatches: []string{patch, kubelet}})
	c.checkAll(t, "created")
}
