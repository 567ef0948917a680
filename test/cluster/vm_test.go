//go:build cluster && vm && matrix

package cluster

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/test/tier"
)

// TestVMCluster is the VM tier's cluster suite (test/vm/guest/cluster.sh,
// make e2e-vm-cluster): in a Debian VM with cgroup v2, under QEMU's
// emulation, the kind CLI (CLUSTER_KIND) creates one control plane and one
// worker with the engine CLUSTER_VM_ENGINE names (docker, root or rootless
// as DOCKER_HOST says, or podman, rootless), from our image
// (CLUSTER_VM_IMAGE=ours: CLUSTER_IMAGE) or from the control image with
// kind's own script (script: CLUSTER_REFERENCE_IMAGE), in the family
// CLUSTER_VM_FAMILY (ipv4 when empty, or dual). It is one row of the
// cluster matrix (runShape): created, checked (checkAll), restarted so that
// every address changes, checked again, with the create and
// restart-to-Ready times; in dual, a pod also resolves names only Docker's
// DNS knows, in IPv6, before and after. The row goes to CLUSTER_LOG_DIR/
// matrix.md, each stage's `kubectl get nodes -o wide` beside it.
//
// CLUSTER_TIME_SCALE stretches every time limit of the test, and the same
// factor goes on the limits of Kubernetes itself that the VM met (kubeadm's
// wait for the control plane, leader election, etcd's request limit, the
// kubelet's runtime calls): under emulation the API server takes minutes
// where it takes seconds on the host.
func TestVMCluster(t *testing.T) {
	slow, err := strconv.Atoi(os.Getenv("CLUSTER_TIME_SCALE"))
	if err != nil || slow < 1 {
		t.Fatalf("CLUSTER_TIME_SCALE=%q: want a whole number from 1", os.Getenv("CLUSTER_TIME_SCALE"))
	}
	sh := shape{name: cmp.Or(os.Getenv("CLUSTER_VM_FAMILY"), "ipv4"), family: os.Getenv("CLUSTER_VM_FAMILY"),
		engine: os.Getenv("CLUSTER_VM_ENGINE"), workers: 1}
	switch sh.family {
	case "", "dual":
	default:
		t.Fatalf("CLUSTER_VM_FAMILY=%q: want empty (ipv4) or dual", sh.family)
	}
	switch sh.engine {
	case "", "docker", "podman":
	default:
		t.Fatalf("CLUSTER_VM_ENGINE=%q: want docker or podman", sh.engine)
	}
	which := map[string]string{"ours": envImage, "script": envReferenceImage}
	label := os.Getenv("CLUSTER_VM_IMAGE")
	if which[label] == "" {
		t.Fatalf("CLUSTER_VM_IMAGE=%q: want ours or script", label)
	}
	image := mustEnv(t, which[label])
	r := newResult(sh, label)
	t.Cleanup(func() { writeTable(t, []*result{r}) })
	engine := cmp.Or(sh.engine, "docker")
	// before the cluster: the cluster's cleanup has the end of the test's
	// time to itself (cluster.setDeadline)
	if label == "ours" && engineRootless(t, engine) {
		t.Run("fuse-overlayfs-node", func(t *testing.T) { fuseOverlayfsNode(t, engine, image, slow) })
	}
	runShape(t, spec{image: image, kind: mustEnv(t, envKind), family: sh.family, engine: sh.engine, workers: 1,
		slow: slow, kubeadmPatches: vmKubeadmPatches(slow, kubeadmV1beta4(t, engine, image)),
		mounts: map[string]string{staticPodPatches(t, slow): vmPatchDir}}, sh, r, 1, haPlan{})
}

// engineRootless says whether engine (docker, as DOCKER_HOST names it, or
// podman) runs its containers in a user namespace of an unprivileged user.
func engineRootless(t *testing.T, engine string) bool {
	t.Helper()
	format := map[string]string{"docker": "{{json .SecurityOptions}}", "podman": "{{.Host.Security.Rootless}}"}[engine]
	out := tier.MustRun(t, time.Minute, engine, "info", "--format", format)
	return strings.Contains(out, "rootless") || strings.TrimSpace(out) == "true"
}

// fuseOverlayfsNode is the rootless fuse-overlayfs path, which no cluster
// node takes here (the guest's kernel mounts overlayfs in a user
// namespace, so the entrypoint keeps overlayfs): a node of image, run with
// the flags kind's provider for engine gives it, /dev/fuse (which kind
// adds for a rootless engine) and KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=
// fuse-overlayfs. containerd and containerd-fuse-overlayfs.service must
// come up, `containerd config dump` must hold fuse-overlayfs and
// restrict_oom_score_adj = true, and containerd must reach the snapshotter
// (listing its snapshots goes through the proxy plugin to its socket). The
// dump goes to the log directory.
func fuseOverlayfsNode(t *testing.T, engine, image string, slow int) {
	name := namePrefix + "fuse-" + tier.RunID()
	tier.NewNetwork(t, engine, name+"-net")
	node := tier.KindNode{Name: name, Network: name + "-net", Cgroupns: "private"}
	t.Setenv("KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER", "fuse-overlayfs")
	var pass []string
	if engine == "podman" { // its provider passes the variable on already
		node.Volume, node.Cluster = name+"-var", name
		tier.MustRun(t, time.Minute, engine, "volume", "create", node.Volume)
		t.Cleanup(func() {
			if _, err := tier.Run(time.Minute, nil, engine, "volume", "rm", "--force", node.Volume); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	} else {
		pass = []string{"--env", "KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER"}
	}
	args := append(append(tier.KindRunArgs(engine, node), pass...), "--device", "/dev/fuse", image)
	n := tier.RunNode(t, engine, name, args...)
	units := []string{"containerd.service", "containerd-fuse-overlayfs.service"}
	if err := eventually(time.Duration(slow), 3*time.Minute, func() error {
		// one line a unit; it exits 0 only when all are active
		out, err := n.ExecErr(append([]string{"systemctl", "is-active"}, units...)...)
		if err != nil {
			return fmt.Errorf("%s: %q: %v", strings.Join(units, ", "), out, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	log := n.MustLog()
	for _, want := range []string{`changing snapshotter from "overlayfs" to "fuse-overlayfs"`, "running in a user namespace"} {
		if !strings.Contains(log, want) {
			t.Errorf("the entrypoint's log lacks %q:\n%s", want, strings.Join(tier.EntrypointLines(log), "\n"))
		}
	}
	dump, err := n.ExecWithin(time.Duration(slow)*time.Minute, "containerd", "config", "dump")
	if err != nil {
		t.Fatalf("containerd rejects the config the entrypoint left: %v", err)
	}
	if err := os.WriteFile(filepath.Join(mustEnv(t, envLogDir), name+"-containerd-config-dump.txt"), []byte(dump), 0o644); err != nil {
		t.Error(err)
	}
	snap, restrict, err := tier.CRISettings(dump)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("containerd config dump: snapshotter = %q, restrict_oom_score_adj = %v", snap, restrict)
	if snap != "fuse-overlayfs" || !restrict {
		t.Errorf("containerd's CRI snapshotter is %q and restrict_oom_score_adj %v, want fuse-overlayfs and true", snap, restrict)
	}
	if out, err := n.ExecWithin(time.Duration(slow)*time.Minute, "ctr", "--namespace", "k8s.io", "snapshots", "--snapshotter", "fuse-overlayfs", "ls"); err != nil {
		t.Errorf("containerd cannot reach the fuse-overlayfs snapshotter: %v\n%s", err, out)
	}
}

// kubeadmV1beta4 says whether kind writes kubeadm's v1beta4 config for the
// image's Kubernetes (/kind/version): kind v0.33.0 does from 1.36 on, and
// v1beta4 moved the timeouts and made extraArgs lists.
func kubeadmV1beta4(t *testing.T, engine, image string) bool {
	t.Helper()
	out, err := tier.Run(2*time.Minute, nil, engine, "run", "--rm", "--entrypoint", "cat", image, "/kind/version")
	if err != nil {
		t.Fatalf("the image's /kind/version: %v", err)
	}
	var minor int
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "v1.%d", &minor); err != nil {
		t.Fatalf("the image's /kind/version %q: %v", out, err)
	}
	return minor >= 36
}

// vmPatchDir is where every node of TestVMCluster finds staticPodPatches'
// files (a read-only mount), for kubeadm's patches.directory.
const vmPatchDir = "/kind/vm-patches"

// staticPodPatches writes kubeadm patches (strategic merge, one file a
// static pod) that let the control plane's containers fail their liveness
// and startup probes slow times as often before the kubelet kills them.
// In the VM (run-20261203-142618, Kubernetes 1.37, rootful Docker) the API
// server restarted 7 times, the controller manager 6 and the scheduler 3
// in the cluster's first 42 minutes; each restart of the API server left
// it unanswered for 6-10 minutes, and the cluster took 32m26s to create.
// Their probes are kubeadm's (every 10 s; liveness killed after 8
// failures, startup after 24); the probes' timeouts stay as they are. The
// directory is world-readable: a rootless engine's daemon mounts it.
func staticPodPatches(t *testing.T, slow int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kind-ep-vm-patches-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		patch := fmt.Sprintf("spec:\n  containers:\n  - name: %s\n    livenessProbe:\n      failureThreshold: %d\n    startupProbe:\n      failureThreshold: %d\n", c, 8*slow, 24*slow)
		if err := os.WriteFile(filepath.Join(dir, c+"+strategic.yaml"), []byte(patch), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// vmKubeadmPatches stretch Kubernetes' own limits by slow, in the schema
// kind writes (v1beta3 or v1beta4).
func vmKubeadmPatches(slow int, v1beta4 bool) []string {
	// arg is one of a component's extra arguments, in either schema.
	arg := func(indent, name, value string) string {
		if v1beta4 {
			return indent + "- name: " + name + "\n" + indent + "  value: \"" + value + "\"\n"
		}
		return indent + name + ": \"" + value + "\"\n"
	}
	// The wait for the control plane's static pods (4m by default), which
	// kubeadm 1.34 takes as its controlPlaneComponentHealthCheck: in
	// v1beta3 the API server's timeoutForControlPlane, in v1beta4 one of
	// InitConfiguration's timeouts.
	//
	// kubeadm 1.37 (v1beta4) also bounds its first API calls by
	// kubernetesAPICall (1m by default). Its kubelet-start phase returns only
	// when the kubelet has started, which waits for the image import
	// (kind-preload-images.service: 5.5 min in the VM with both nodes
	// importing at once), and right after it wait-control-plane creates the
	// admin user's ClusterRoleBinding, retrying for that one minute while
	// the API server's pod has not even been created: `kubeadm init` failed
	// with "could not bootstrap the admin user in file admin.conf: unable to
	// create ClusterRoleBinding: ... context deadline exceeded". The kubelet's
	// health check, and a joining worker's discovery and TLS bootstrap (5m
	// each), get the same stretch.
	wait := strconv.Itoa(4*slow) + "m0s"
	patch := "kind: ClusterConfiguration\n"
	var init, join string
	if v1beta4 {
		init = "kind: InitConfiguration\ntimeouts:\n  controlPlaneComponentHealthCheck: " + wait + "\n" +
			"  kubeletHealthCheck: " + wait + "\n  kubernetesAPICall: " + wait + "\n"
		join = "kind: JoinConfiguration\ntimeouts:\n  kubeletHealthCheck: " + wait + "\n  kubernetesAPICall: " + wait + "\n" +
			"  discovery: " + wait + "\n  tlsBootstrap: " + wait + "\n"
	} else {
		patch += "apiServer:\n  timeoutForControlPlane: " + wait + "\n"
	}
	// The controller manager and the scheduler exit when they cannot renew
	// their leader lease within the renew deadline (10s of a 15s lease,
	// retried every 2s), and kubeadm init waits for both to be healthy.
	// Under emulation the API server and etcd can answer that slowly: in a
	// rootless Docker run both crash-looped through most of a 35-minute
	// kubeadm init. They get the same stretch as every other limit.
	for _, component := range []string{"controllerManager", "scheduler"} {
		patch += component + ":\n  extraArgs:\n" +
			arg("    ", "leader-elect-lease-duration", strconv.Itoa(15*slow)+"s") +
			arg("    ", "leader-elect-renew-deadline", strconv.Itoa(10*slow)+"s") +
			arg("    ", "leader-elect-retry-period", strconv.Itoa(2*slow)+"s")
		if v1beta4 && component == "controllerManager" {
			// A merge patch replaces a list whole: kind's own argument.
			patch += arg("    ", "enable-hostpath-provisioner", "true")
		}
	}
	// etcd fails a request it cannot commit within 5s plus two election
	// timeouts (1s each by default): under emulation and rootless Docker,
	// fdatasync took up to 2.9s and requests up to 6.8s, and kind's
	// `kubectl apply` of the default storage class failed with "etcdserver:
	// request timed out". One member: a longer election timeout (with the
	// heartbeat at its usual tenth of it) changes nothing else.
	//
	// etcd also stops syncing its writes to disk (unsafe-no-fsync, as CI
	// jobs on kind commonly run it), so that a write waits on no
	// fdatasync of the emulated disk. Some limits of the control plane
	// cannot be stretched: kube-apiserver 1.37 exits when its
	// rbac/bootstrap-roles hook has not listed and reconciled the roles
	// after 30 s of polling (a try under way finishes first), and in
	// run-20261205-004339 it did so after the restart ("unable to
	// initialize roles: timed out waiting for the condition"); each new
	// start of the API server costs the VM minutes of CPU. Writes that
	// were not synced are lost only if the guest's kernel stops; stopping
	// and starting a node, the restart the tests make, keeps them.
	patch += "etcd:\n  local:\n    extraArgs:\n" +
		arg("      ", "heartbeat-interval", strconv.Itoa(100*slow)) +
		arg("      ", "election-timeout", strconv.Itoa(1000*slow)) +
		arg("      ", "unsafe-no-fsync", "true")
	// The kubelet cancels a runtime call after 2m. The node image imports
	// its images without unpacking them (kind-preload-images.service), so
	// the first container of an image unpacks it inside CreateContainer
	// (containerd's CRI does that when the snapshot is missing); under
	// rootless Docker and emulation, kube-proxy's and the CNI's took longer,
	// and every retry started over ("CreateContainerError: context deadline
	// exceeded" until kind's limit).
	kubelet := "kind: KubeletConfiguration\nruntimeRequestTimeout: " + strconv.Itoa(2*slow) + "m0s\n"
	// kubeadm reads staticPodPatches' files on every node that runs a
	// control plane (init, and join for further control planes).
	patchDir := "patches:\n  directory: " + vmPatchDir + "\n"
	if !v1beta4 {
		init, join = "kind: InitConfiguration\n", "kind: JoinConfiguration\n"
	}
	return []string{patch, kubelet, init + patchDir, join + patchDir}
}
