# The VM tier's node suite (make e2e-vm): the node image on its own, under
# root Docker, rootless Docker and (unless VM_PODMAN=0) kind's podman
# provider with rootless podman; and the differential tier under both
# Dockers. Sourced by scenarios.sh, which holds the shared helpers
# and scenarios; see test/vm/README.md for what each scenario asserts.
#
# This script sets up the host, picks the scenarios and collects the logs;
# the checks are Go tests of test/e2e (TestVM* in vm_test.go, and
# TestDifferential), from their test binary e2e.test on the data disk.

# collect NAME [CLI [PREFIX]] keeps what explains the state of the node NAME
# of CLI (dk, the default, or pm) in the current scenario's directory, in
# files whose names start with PREFIX: its log without the tty's carriage
# returns, inspect, failed units, journal, containerd config, mount table
# and `entrypoint check --json`.
collect() {
  local name=$1 cli=${2:-dk} to=$res/$scenario/${3:-}
  "$cli" logs "$name" 2>&1 | tr -d '\r' > "${to}logs.txt"
  "$cli" inspect "$name" > "${to}inspect.json" 2>&1
  "$cli" exec "$name" systemctl --failed --no-pager > "${to}failed-units.txt" 2>&1
  "$cli" exec "$name" journalctl --no-pager -n 400 > "${to}journal.txt" 2>&1
  "$cli" exec "$name" cat /etc/containerd/config.toml > "${to}config.toml" 2>&1
  "$cli" exec "$name" cat /proc/1/mountinfo > "${to}mountinfo.txt" 2>&1
  "$cli" exec "$name" /usr/local/bin/entrypoint check --json > "${to}check.json" 2>&1
}

# e2e_scenario NAME TEST [VAR=VALUE...]: the scenario NAME, TEST of the e2e
# test with that environment (e2e_test).
e2e_scenario() {
  begin "$1"
  shift
  e2e_test "$@"
  end
}

# node_scenario NAME TEST: the scenario NAME, TEST of the e2e test on the
# node $node (E2E_VM_NODE), whose state is collected after.
node_scenario() {
  begin "$1"
  e2e_test "$2" E2E_VM_NODE="$node"
  collect "$node"
  end
}

# skip_all REASON NAME...: the scenarios NAME... cannot run (skip).
skip_all() {
  local why=$1 name
  shift
  for name in "$@"; do skip "$name" "$why"; done
}

# The test's log lines that are progress, not a failed check: left out of
# the scenario's FAIL line.
e2e_progress=' systemd running after | took [0-9.]+m?s$|: check row .* warns: |: === |kind create cluster \(|: controllers \[|: snapshotter |: exited with |tolerated$'

# e2e_test [--rootless] TEST [VAR=VALUE...]: runs TEST of the compiled e2e
# test (test/e2e, tags e2e,vm: e2e.test on the data disk), with the
# environment VAR=VALUE..., as root against the daemon DOCKER_HOST names, or
# with --rootless as the rootless user. Its output is the scenario's
# go-test.txt; a failed run is one failure of the scenario, with the test's
# first failed checks; so is a run that did not pass TEST (a -test.run that
# matched nothing exits 0).
e2e_test() {
  local as=() test out=$res/$scenario/go-test.txt rc=0
  if [[ $1 == --rootless ]]; then
    as=(as_rootless 1260)
    shift
  fi
  test=$1
  shift
  (cd "$in/repo/test/e2e" && "${as[@]}" env E2E_NODE_IMAGE="$NODE_IMAGE" E2E_BOOT_LIMIT="${BOOT_LIMIT}s" "$@" \
    timeout 1200 "$in/e2e.test" -test.run "^$test\$" -test.v -test.parallel 4 -test.timeout 19m) \
    > "$out" 2>&1 || rc=$?
  say "$test exited $rc"
  if ((rc != 0)); then
    fail "$test: $(grep -E '^\s*(--- FAIL|FAIL:|panic:|\S+_test\.go:[0-9]+: |.*differs from)' "$out" | grep -vE "$e2e_progress" \
      | sed 's/^\s*//' | head -n 8 | cut -c1-300 | paste -sd'|' -)"
  elif ! grep -qE "^--- PASS: $test \(" "$out"; then
    fail "$test exited 0 without '--- PASS: $test'"
  fi
}

# --- the host ------------------------------------------------------------------
# Docker gives a node on a user-defined network the host's search domains:
# the restart scenario checks that they stay one line.
echo 'search vm.example' > /etc/resolv.conf

host_scenario

# --- 1. default node -------------------------------------------------------------
# One node of root Docker for three scenarios: booted, then its kubelet
# cgroups, then restarted. TestMain of each run checks that the VM's own
# /sys mount is unchanged (fix_mount remounts only the node's own /sys).
node=kind-vm-default
if ((ready)); then
  node_scenario default-node TestVMDefaultNode
  e2e_scenario kubelet-cgroup TestVMKubeletCgroup E2E_VM_NODE="$node"

  # --- 2. docker restart ---------------------------------------------------------
  node_scenario restart TestVMRestart
  dk rm --force --volumes "$node" > /dev/null

  # --- 2b. the script and ours, diffed ---------------------------------------------
  # The differential tier (TestDifferential): kind's script (v0.23.0's, or
  # with VM_STACK the stack's release's: KIND_VERSION) and our
  # binary in the same node image, their states diffed after the
  # normalisations docs/differences.md documents. The test picks the
  # scenarios of this host (cgroup v2, root or rootless Docker).
  e2e_scenario differential TestDifferential E2E_DIFF_KIND="$in/kind-reference" E2E_DIFF_KIND_VERSION="$KIND_VERSION"
else
  skip_all "the host setup failed" default-node kubelet-cgroup restart differential
fi

rootless_docker_scenario

# --- 3. rootless node ------------------------------------------------------------
node=kind-vm-rootless
if ((rootless_ready)); then
  node_scenario rootless-node TestVMRootlessNode
  dk rm --force --volumes "$node" > /dev/null
  e2e_scenario rootless-differential TestDifferential E2E_DIFF_KIND="$in/kind-reference" E2E_DIFF_KIND_VERSION="$KIND_VERSION"
else
  skip_all "rootless Docker is not ready" rootless-node rootless-differential
fi

# --- 4. rootless podman: kind's podman provider --------------------------------------
# The kind CLI (KIND_VERSION: v0.23.0, or the stack's release; from the data
# disk) with KIND_EXPERIMENTAL_PROVIDER=podman, run by the rootless user
# against the guest's podman (bookworm's 4.3 with slirp4netns, trixie's 5.4
# with pasta; netavark, aardvark-dns; cgroup v2, the systemd cgroup manager through
# the user's manager), in TestVMRootlessPodman. The image has no kubeadm:
# creation must get through "Preparing nodes" and "Writing configuration"
# and stop at kubeadm init. This script loads the image into the user's
# podman, collects the nodes' logs and deletes the cluster.
podman_cluster=kind-vm-podman
podman_image=localhost/kind-entrypoint-podman/node:${NODE_IMAGE_ID:0:12}
kind_podman() { as_rootless 600 env KIND_EXPERIMENTAL_PROVIDER=podman "$in/kind" "$@"; }

if ((PODMAN)); then
  begin rootless-podman
  pm info > "$res/$scenario/podman-info.txt" 2>&1 || fail "rootless podman info failed: $(tail -n 3 "$res/$scenario/podman-info.txt" | paste -sd'|' -)"
  grep -q 'rootless: true' "$res/$scenario/podman-info.txt" || fail "podman info does not say rootless: true"
  t=$SECONDS
  if [[ $(pm image inspect -f '{{.Id}}' "$NODE_IMAGE_ID" 2> /dev/null) != "$NODE_IMAGE_ID" ]]; then
    out=$(as_rootless 900 podman load -q -i "$in/node.tar" 2>&1) || fail "podman load: $out"
  fi
  if [[ $(pm image inspect -f '{{.Id}}' "$NODE_IMAGE_ID" 2>&1) != "$NODE_IMAGE_ID" ]]; then
    fail "podman has no image $NODE_IMAGE_ID after the load"
  elif ! pm tag "$NODE_IMAGE_ID" "$podman_image"; then
    fail "podman tag failed"
  else
    say "node image in rootless podman after $((SECONDS - t))s"
    e2e_test --rootless TestVMRootlessPodman E2E_ENGINE=podman E2E_NODE_IMAGE="$podman_image" \
      E2E_VM_CLUSTER="$podman_cluster" E2E_VM_KIND="$in/kind"
    for name in "$podman_cluster-control-plane" "$podman_cluster-worker"; do
      ! pm container exists "$name" || collect "$name" pm "$name-"
    done
  fi
  kind_podman delete cluster --name "$podman_cluster" > "$res/$scenario/kind-delete.txt" 2>&1 \
    || fail "kind delete cluster failed: $(tail -n 2 "$res/$scenario/kind-delete.txt" | paste -sd'|' -)"
  ! pm network exists kind || pm network rm kind > /dev/null || fail "podman network rm kind failed"
  end
fi

# --- 5. rootless, memory not delegated ---------------------------------------------
# Delegate= without memory is not enough on systemd 252: with
# DefaultMemoryAccounting=yes the user's slice enables memory for its
# children anyway, and the user's manager passes it on. Memory leaves the
# user manager's cgroup.controllers only when no unit of the user's slice
# asks for it, and after the slice is made anew (a controller enabled in a
# live cgroup stays enabled).
node=kind-vm-nomemory
if ((rootless_ready)); then
  begin rootless-no-memory
  user_systemctl stop docker.service
  mkdir -p "/run/systemd/system/$user_unit.d" "/run/systemd/system/user-runtime-dir@$rootless_uid.service.d"
  printf '[Service]\nDelegate=\nDelegate=cpu cpuset io pids\nMemoryAccounting=no\n' \
    > "/run/systemd/system/$user_unit.d/no-memory.conf"
  printf '[Service]\nMemoryAccounting=no\n' \
    > "/run/systemd/system/user-runtime-dir@$rootless_uid.service.d/no-memory.conf"
  systemctl daemon-reload
  systemctl stop "$user_unit" "user-runtime-dir@$rootless_uid.service" "user-$rootless_uid.slice"
  systemctl start "$user_unit"
  controllers=$(cat "$user_cgroup/cgroup.controllers" 2>&1)
  echo "$user_unit cgroup.controllers: $controllers" > "$res/$scenario/user-controllers.txt"
  if [[ " $controllers " == *" memory "* ]]; then
    fail "setup: memory still in $user_cgroup/cgroup.controllers: '$controllers'"
  elif ! start_rootless; then
    fail "rootless dockerd did not start again: $(journalctl --no-pager -n 5 _UID="$rootless_uid" | paste -sd'|' -)"
  else
    e2e_test TestVMRootlessNoMemory E2E_VM_NODE="$node" E2E_EXIT_LIMIT="${EXIT_LIMIT}s"
  fi
  collect "$node"
  end
else
  skip rootless-no-memory "rootless Docker is not ready"
fi
