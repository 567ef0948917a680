# The VM tier's cluster suite (make e2e-vm-cluster): real Kubernetes on our
# nodes on cgroup v2. Sourced by scenarios.sh, which holds the shared
# helpers and the vm-host and rootless-docker scenarios.
#
# The checks are the cluster tier's own (test/cluster/cluster_test.go,
# TestVMOneNode in vm_test.go), compiled on the host into cluster.test: the
# kind CLI of the release made for the node image's Kubernetes creates one
# control plane from the cluster tier's node image; the node is Ready, every
# kube-system pod is Running and ready, and a pod resolves the kubernetes
# service's name (CoreDNS) and the node container's name (CoreDNS, the
# node's resolv.conf, then Docker's embedded DNS through step 10's rules).
# The test removes the cluster and its network, and on failure exports the
# node logs (kind export logs) into the scenario's results first.

# cluster_scenario NAME: the test against the daemon DOCKER_HOST names.
cluster_scenario() {
  begin "$1"
  local dir=$res/$1 rc=0 t=$SECONDS
  # -test.timeout: the test's own limits (TIME_SCALE times the host's)
  # come first; this one only stops a hang
  (cd "$dir" && env CLUSTER_IMAGE="$NODE_IMAGE" CLUSTER_KIND="$in/kind" CLUSTER_LOG_DIR="$dir" \
    CLUSTER_TIME_SCALE="$TIME_SCALE" HOME=/root \
    "$in/cluster.test" -test.run '^TestVMOneNode$' -test.v -test.timeout "$((TIME_SCALE * 20))m") \
    > "$dir/go-test.txt" 2>&1 || rc=$?
  say "cluster.test exited $rc after $((SECONDS - t))s"
  # progress for the serial log: what kind printed and each check's line
  grep -E '^\s+(✓|✗)|cluster_test.go:[0-9]+:' "$dir/go-test.txt" | cut -c1-300 | sed 's/^/vm-tier:   /'
  if ((rc != 0)); then
    # the test's first lines that are not its progress logs or the node
    # logs it prints on failure
    fail "TestVMOneNode exited $rc: $(grep -E '^\s+\S+_test.go:[0-9]+: ' "$dir/go-test.txt" \
      | grep -vE ' create cluster --image | Running after |\(errors: |: === |kind export logs ' \
      | head -n 3 | cut -c1-300 | paste -sd'|' -)"
    # and kind's own error, if it failed
    ! grep -qE '^\s+ERROR: ' "$dir/go-test.txt" \
      || fail "kind: $(grep -m1 -E '^\s+ERROR: ' "$dir/go-test.txt" | sed 's/^\s*//' | cut -c1-300)"
  fi
  grep -qx -- '--- PASS: TestVMOneNode .*' "$dir/go-test.txt" || ((rc != 0)) \
    || fail "cluster.test exited 0 without '--- PASS: TestVMOneNode'"
  end
}

host_scenario
if ((ready)); then
  cluster_scenario cluster-root
else
  skip cluster-root "the host setup failed"
fi

rootless_docker_scenario
if ((rootless_ready)); then
  cluster_scenario cluster-rootless
else
  skip cluster-rootless "rootless Docker is not ready"
fi
