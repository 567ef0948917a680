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

# watch_cluster prints, every minute, where the cluster's nodes are (the
# test itself reports only when kind returns): the import and the kubelet,
# and the pods that are not Running yet. It also prints each new Warning
# event once (a CreateContainerError's message is in its event), and the
# last lines a crash-looping container wrote before it ended: the serial log
# is all that is left when the VM's time runs out. Progress only: it asserts
# nothing.
watch_cluster() {
  local n units pods k=(kubectl --kubeconfig=/etc/kubernetes/admin.conf) line pod
  local -A seen=()
  while sleep 60; do
    for n in $(dk ps --filter name=kind-ep-cl- --format '{{.Names}}' 2> /dev/null); do
      units=$(dk exec "$n" systemctl is-active kind-preload-images.service kubelet.service 2>&1 | paste -sd' ' -)
      if pods=$(dk exec "$n" "${k[@]}" get pods -A --no-headers 2> /dev/null); then
        pods=$(awk '$4 != "Running" {print $2 ":" $4} END {print NR " pods"}' <<< "$pods" | paste -sd' ' -)
      else
        pods="no API server answer"
      fi
      say "  $n: import, kubelet: $units; $(cut -c1-200 <<< "$pods")"
      while IFS= read -r line; do
        [[ -n $line && -z ${seen[$line]:-} ]] || continue
        seen[$line]=1
        say "    event: $(cut -c1-400 <<< "$line")"
      done < <(dk exec "$n" "${k[@]}" get events -A --field-selector type=Warning --no-headers \
        -o custom-columns=OBJ:.involvedObject.name,REASON:.reason,MSG:.message 2> /dev/null | sort -u)
      while IFS= read -r pod; do
        [[ -n $pod ]] || continue
        line=$(dk exec "$n" "${k[@]}" logs -n kube-system --previous --tail 4 "$pod" 2>&1 | cut -c1-300)
        [[ -z ${seen[$pod:$line]:-} ]] || continue
        seen[$pod:$line]=1
        say "    $pod, previous run's last lines: $(paste -sd'|' - <<< "$line")"
      done < <(dk exec "$n" "${k[@]}" get pods -n kube-system --no-headers 2> /dev/null \
        | awk '$3 == "CrashLoopBackOff" || $3 == "Error" {print $1}')
    done
  done
}

# cluster_scenario NAME: the test against the daemon DOCKER_HOST names.
cluster_scenario() {
  begin "$1"
  local dir=$res/$1 rc=0 t=$SECONDS watcher left
  # What is left of the VM's time limit, less 3 minutes to write the results:
  # a test cut short by -test.timeout still leaves its output; a VM killed
  # by the host leaves nothing.
  left=$((VM_TIMEOUT - $(cut -d. -f1 /proc/uptime) - 180))
  if ((left < 600)); then
    fail "not run: ${left}s left of VM_TIMEOUT, want 600s at least"
    end
    return
  fi
  watch_cluster &
  watcher=$!
  (cd "$dir" && env CLUSTER_IMAGE="$NODE_IMAGE" CLUSTER_KIND="$in/kind" CLUSTER_LOG_DIR="$dir" \
    CLUSTER_TIME_SCALE="$TIME_SCALE" HOME=/root \
    "$in/cluster.test" -test.run '^TestVMOneNode$' -test.v -test.timeout "${left}s") \
    > "$dir/go-test.txt" 2>&1 || rc=$?
  kill "$watcher"
  wait "$watcher" 2> /dev/null
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

# CLUSTERS (VM_CLUSTERS on the host) names the daemons that get a cluster.
wants() { [[ " $CLUSTERS " == *" $1 "* ]]; }

host_scenario
if wants root; then
  if ((ready)); then
    cluster_scenario cluster-root
  else
    skip cluster-root "the host setup failed"
  fi
fi

if wants rootless; then
  rootless_docker_scenario
  if ((rootless_ready)); then
    cluster_scenario cluster-rootless
  else
    skip cluster-rootless "rootless Docker is not ready"
  fi
fi
