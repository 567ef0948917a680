# The VM tier's cluster suite (make e2e-vm-cluster): real Kubernetes on our
# nodes on cgroup v2. Sourced by scenarios.sh, which holds the shared
# helpers and the vm-host and rootless-docker scenarios.
#
# The checks are the cluster tier's own (test/cluster: TestVMCluster in
# vm_test.go, which runs one row of the cluster matrix, runShape), compiled
# on the host into cluster.test: the kind CLI of the release made for the
# node image's Kubernetes creates one control plane and one worker, from our
# image or from the control image (kind's own script on the same image), and
# the cluster is checked (every node Ready, every kube-system pod Running and
# ready, pods resolving the kubernetes service's name and a node container's
# name through Docker's or podman's DNS, pods reaching each other),
# restarted so that every address changes, and checked again. The test
# removes the cluster and its network, and on failure exports the node logs
# (kind export logs) into the scenario's results first.
#
# Scenarios (CLUSTERS, from VM_CLUSTERS on the host, picks among them; they
# run in this order, whatever the order there):
#   root            cluster-root: our image, root Docker
#   rootless        rootless-docker, cluster-rootless: our image, rootless Docker
#   podman          rootless-podman, cluster-podman: our image, rootless podman
#   root-control    cluster-root-control: the control image, root Docker
#   podman-control  (rootless-podman,) cluster-podman-control: the control
#                   image, rootless podman
#   root-dual       cluster-root-dual: our image, dual-stack, root Docker

# watch_cluster prints, every 3 minutes, where the cluster's nodes are (the
# test itself reports only when kind returns): the import and the kubelet,
# and the pods that are not Running yet. It also prints each new Warning
# event once (a CreateContainerError's message is in its event), and the
# last lines a crash-looping container wrote before it ended: the serial log
# is all that is left when the VM's time runs out. Each round begins with
# the VM's load: where its CPU and memory go (the busiest processes over 5
# seconds), which says whether a stalled control plane is starved and by
# what. Progress only: it asserts nothing, and it keeps to a round every 3
# minutes because each round's execs cost the VM's CPU too (every minute,
# a round under rootless podman took half of the next minute).
watch_cluster() {
  local cli=$1 n units pods k=(kubectl --kubeconfig=/etc/kubernetes/admin.conf) line pod
  local -A seen=()
  while sleep 180; do
    say "  vm: load $(cut -d' ' -f1-3 /proc/loadavg), memory $(free -m | awk '$1 == "Mem:" {print "used " $3 " MiB, available " $7 " MiB"}'); busiest: $(top -b -n 2 -d 5 -w 200 -e m -o %CPU \
      | awk '/^top -/ {round++} round == 2 && f && $9 + 0 > 0 && n++ < 6 {printf "%s %s%% %s, ", $12, $9, $6} /^ *PID / {f = round == 2}')"
    for n in $("$cli" ps --filter name=kind-ep-cl- --format '{{.Names}}' 2> /dev/null | grep -E -- '-(control-plane|worker)$'); do
      units=$("$cli" exec "$n" systemctl is-active kind-preload-images.service kubelet.service 2>&1 | paste -sd' ' -)
      if [[ $n != *-control-plane ]]; then
        say "  $n: import, kubelet: $units"
        continue
      elif pods=$("$cli" exec "$n" "${k[@]}" get pods -A --no-headers 2> /dev/null); then
        pods=$(awk '$4 != "Running" {print $2 ":" $4} END {print NR " pods"}' <<< "$pods" | paste -sd' ' -)
      else
        pods="no API server answer"
        # An API server that exits (its post-start hooks' fixed limits) is
        # seen by nothing above while it is down: the last lines of its
        # exited container (the kubelet keeps the last one), from the
        # node's runtime, where a fatal line is the last. Not --latest:
        # crictl then names the newest container whatever its state.
        pod=$("$cli" exec "$n" crictl ps -a -q --name '^kube-apiserver$' --state exited 2> /dev/null | head -n 1)
        if [[ -n $pod && -z ${seen[$pod]:-} ]]; then
          seen[$pod]=1
          line=$("$cli" exec "$n" crictl logs --tail 2 "$pod" 2>&1 | cut -c1-300 | paste -sd'|' -)
          say "    kube-apiserver, exited container ${pod:0:13}'s last lines: $line"
        fi
      fi
      say "  $n: import, kubelet: $units; $(cut -c1-200 <<< "$pods")"
      while IFS= read -r line; do
        [[ -n $line && -z ${seen[$line]:-} ]] || continue
        seen[$line]=1
        say "    event: $(cut -c1-400 <<< "$line")"
      done < <("$cli" exec "$n" "${k[@]}" get events -A --field-selector type=Warning --no-headers \
        -o custom-columns=OBJ:.involvedObject.name,REASON:.reason,MSG:.message 2> /dev/null | sort -u)
      while IFS= read -r pod; do
        [[ -n $pod ]] || continue
        line=$("$cli" exec "$n" "${k[@]}" logs -n kube-system --previous --tail 4 "$pod" 2>&1 | cut -c1-300)
        [[ -z ${seen[$pod:$line]:-} ]] || continue
        seen[$pod:$line]=1
        say "    $pod, previous run's last lines: $(paste -sd'|' - <<< "$line")"
      done < <("$cli" exec "$n" "${k[@]}" get pods -n kube-system --no-headers 2> /dev/null \
        | awk '$3 == "CrashLoopBackOff" || $3 == "Error" {print $1}')
    done
  done
}

# leftover_cluster CLI: removes what is left of a cluster, which the test's
# own cleanup (remove in cluster_test.go) should have removed: it keeps the
# last minutes of its -test.timeout to export the node logs and delete the
# cluster, so only a cleanup that failed leaves anything. The nodes, their
# volumes (Docker's anonymous ones with -v, podman's named ones by prefix)
# and their network go, so that the next scenario has the VM to itself.
# Each call has the CLI's 5-minute limit.
leftover_cluster() {
  local cli=$1 n
  for n in $("$cli" ps -a --filter name=kind-ep-cl- --format '{{.Names}}' 2> /dev/null); do
    fail "node $n was left behind: the test's cleanup did not remove it"
    "$cli" rm -f -v "$n" > /dev/null 2>&1 || say "$cli rm -f -v $n failed"
  done
  for n in $("$cli" volume ls --format '{{.Name}}' 2> /dev/null | grep -E '^kind-ep-cl-'); do
    "$cli" volume rm -f "$n" > /dev/null 2>&1 || say "$cli volume rm $n failed"
  done
  for n in $("$cli" network ls --format '{{.Name}}' 2> /dev/null | grep -E '^kind-ep-cl-'); do
    "$cli" network rm "$n" > /dev/null 2>&1 || say "$cli network rm $n failed"
  done
}

# cluster_scenario NAME ENGINE IMAGE [FAMILY]: TestVMCluster with ENGINE
# (docker: the daemon DOCKER_HOST names, as root; podman: the rootless
# user's podman), IMAGE (ours or script) and FAMILY (empty: ipv4, or dual).
cluster_scenario() {
  local name=$1 engine=$2 image=$3 family=${4:-}
  begin "$name"
  local dir=$res/$name rc=0 t=$SECONDS watcher left as=() cli=dk images
  # What is left of the VM's time limit, less 3 minutes to write the results:
  # a test cut short by -test.timeout still leaves its output; a VM killed
  # by the host leaves nothing.
  left=$((VM_TIMEOUT - $(cut -d. -f1 /proc/uptime) - 180))
  # and at most CLUSTER_LIMIT (VM_CLUSTER_LIMIT on the host): one cluster
  # that hangs must not take the others' time. The test keeps the last
  # minutes of it for its cleanup (exported logs, the cluster deleted).
  ((left <= CLUSTER_LIMIT)) || left=$CLUSTER_LIMIT
  if ((left < 600)); then
    fail "not run: ${left}s left of VM_TIMEOUT, want 600s at least"
    end
    return
  fi
  images=(CLUSTER_IMAGE="$NODE_IMAGE" CLUSTER_REFERENCE_IMAGE="$REFERENCE_IMAGE")
  if [[ $engine == podman ]]; then
    as=(as_rootless "$((left + 60))") cli=pm
    images=(CLUSTER_IMAGE="$podman_image" CLUSTER_REFERENCE_IMAGE="$podman_reference_image")
    chown "$rootless_user" "$dir"
  fi
  watch_cluster "$cli" &
  watcher=$!
  (cd "$dir" && "${as[@]}" env "${images[@]}" CLUSTER_KIND="$in/kind" CLUSTER_LOG_DIR="$dir" \
    CLUSTER_TIME_SCALE="$TIME_SCALE" CLUSTER_VM_ENGINE="$engine" CLUSTER_VM_IMAGE="$image" CLUSTER_VM_FAMILY="$family" \
    "$in/cluster.test" -test.run '^TestVMCluster$' -test.v -test.timeout "${left}s") \
    > "$dir/go-test.txt" 2>&1 || rc=$?
  kill "$watcher"
  wait "$watcher" 2> /dev/null
  say "cluster.test exited $rc after $((SECONDS - t))s"
  leftover_cluster "$cli"
  # progress for the serial log: what kind printed, each check's line, the
  # row
  grep -E '^\s+(✓|✗)|(cluster|matrix|vm)_test.go:[0-9]+:|^\s+\| ' "$dir/go-test.txt" | cut -c1-300 | sed 's/^/vm-tier:   /'
  if ((rc != 0)); then
    # the test's first lines that are not its progress logs or the node
    # logs it prints on failure
    fail "TestVMCluster exited $rc: $(grep -E '^\s+\S+_test.go:[0-9]+: ' "$dir/go-test.txt" \
      | grep -vE ' create cluster --image | Running after |\(errors: |: === |kind export logs |matrix:|, etcd:| -> \[|entrypoint log after|every node Ready|created, every node' \
      | head -n 3 | cut -c1-300 | paste -sd'|' -)"
    # and kind's own error, if it failed
    ! grep -qE '^\s+ERROR: ' "$dir/go-test.txt" \
      || fail "kind: $(grep -m1 -E '^\s+ERROR: ' "$dir/go-test.txt" | sed 's/^\s*//' | cut -c1-300)"
  fi
  grep -qx -- '--- PASS: TestVMCluster .*' "$dir/go-test.txt" || ((rc != 0)) \
    || fail "cluster.test exited 0 without '--- PASS: TestVMCluster'"
  end
}

# podman_load_scenario: rootless-podman. The user's podman answers and is
# rootless, with both images loaded and tagged by id (a docker archive's
# names get another registry in podman's store). Sets podman_ready.
podman_image=localhost/kind-entrypoint-cluster/node-vm:${NODE_IMAGE_ID:0:12}
podman_reference_image=localhost/kind-entrypoint-cluster/node-vm-reference:${REFERENCE_IMAGE_ID:0:12}
podman_load_scenario() {
  begin rootless-podman
  podman_ready=0
  local t=$SECONDS out
  pm info > "$res/$scenario/podman-info.txt" 2>&1 || fail "rootless podman info failed: $(tail -n 3 "$res/$scenario/podman-info.txt" | paste -sd'|' -)"
  grep -q 'rootless: true' "$res/$scenario/podman-info.txt" || fail "podman info does not say rootless: true"
  if [[ $(pm image inspect -f '{{.Id}}' "$REFERENCE_IMAGE_ID" 2> /dev/null) != "$REFERENCE_IMAGE_ID" ]]; then
    out=$(as_rootless 1800 podman load -q -i "$in/node.tar" 2>&1) || fail "podman load: $out"
  fi
  if [[ $(pm image inspect -f '{{.Id}}' "$NODE_IMAGE_ID" 2>&1) != "$NODE_IMAGE_ID" \
    || $(pm image inspect -f '{{.Id}}' "$REFERENCE_IMAGE_ID" 2>&1) != "$REFERENCE_IMAGE_ID" ]]; then
    fail "podman lacks $NODE_IMAGE_ID or $REFERENCE_IMAGE_ID after the load"
  elif ! pm tag "$NODE_IMAGE_ID" "$podman_image" || ! pm tag "$REFERENCE_IMAGE_ID" "$podman_reference_image"; then
    fail "podman tag failed"
  else
    say "node images in rootless podman after $((SECONDS - t))s"
  fi
  ((${#problems[@]})) || podman_ready=1
  end
}

# CLUSTERS (VM_CLUSTERS on the host) names the scenarios to run.
wants() { [[ " $CLUSTERS " == *" $1 "* ]]; }

# run_row WANT NAME ENGINE IMAGE [FAMILY]: the scenario cluster-NAME, once
# its engine is ready (the first row of rootless Docker or podman loads
# it: rootless-docker, rootless-podman).
rootless_tried=0 podman_tried=0
run_row() {
  local want=$1 engine=$2 image=$3 family=${4:-} ok=$ready why="the host setup failed"
  wants "$want" || return 0
  case $want in
    rootless)
      # it exports DOCKER_HOST: the rows after this one are root's again
      ((rootless_tried)) || { rootless_tried=1; rootless_docker_scenario; unset DOCKER_HOST; }
      ok=$rootless_ready why="rootless Docker is not ready"
      ;;
    podman*)
      ((podman_tried)) || { podman_tried=1; podman_load_scenario; }
      ok=$podman_ready why="rootless podman is not ready"
      ;;
  esac
  if ((ok)); then
    [[ $want != rootless ]] || export DOCKER_HOST=$rootless_sock
    cluster_scenario "cluster-$want" "$engine" "$image" "$family"
    unset DOCKER_HOST
  else
    skip "cluster-$want" "$why"
  fi
}

host_scenario
# our image under each engine first, then the controls, then dual-stack
run_row root docker ours
run_row rootless docker ours
run_row podman podman ours
run_row root-control docker script
run_row podman-control podman script
run_row root-dual docker ours dual
