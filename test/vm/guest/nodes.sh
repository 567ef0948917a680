# The VM tier's node suite (make e2e-vm): the node image on its own, under
# root Docker, rootless Docker and (unless VM_PODMAN=0) kind's podman
# provider with rootless podman; and the differential tier under both
# Dockers. Sourced by scenarios.sh, which holds the shared helpers
# and scenarios; see test/vm/README.md for what each scenario asserts.

# kind's `docker run` flags for a node (pkg/cluster/internal/providers/docker,
# provision.go, v0.23.0), less labels and published ports.
kind_run() {
  local name=$1
  shift
  dk run --name "$name" --hostname "$name" --network kind \
    --detach --tty --privileged \
    --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
    --tmpfs /tmp --tmpfs /run --volume /var --volume /lib/modules:/lib/modules:ro \
    --restart=on-failure:1 --init=false --cgroupns=private \
    "$@" "$NODE_IMAGE" > /dev/null
}

# node_logs prints the container's log without the tty's carriage returns.
node_logs() { dk logs "$1" 2>&1 | tr -d '\r'; }

failed_units() { dk exec "$1" systemctl --failed --no-legend --plain --no-pager 2>&1; }

# wait_running waits up to BOOT_LIMIT for systemd in the node to finish
# booting: `running`, or `degraded`, which ends the wait at once and is left
# for check_booted to report with the rest. Returns 1 (a failure recorded)
# when systemd never got there. Sets boot_took.
wait_running() {
  local name=$1 start=$SECONDS state='' status
  boot_took=-1
  while ((SECONDS - start < BOOT_LIMIT)); do
    state=$(dk exec "$name" systemctl is-system-running 2> /dev/null | tr -d '\r')
    if [[ $state == running || $state == degraded ]]; then
      boot_took=$((SECONDS - start))
      say "$name: systemd $state after ${boot_took}s"
      return 0
    fi
    status=$(dk inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$name" 2> /dev/null)
    if [[ $status == exited* ]]; then
      fail "$name: container exited (code ${status#exited }) before systemd was running"
      return 1
    fi
    sleep 1
  done
  fail "$name: systemd not running after ${BOOT_LIMIT}s (last state '$state')"
  return 1
}

# collect keeps what explains a node's state in the current scenario's
# directory.
collect() {
  local name=$1 dir=$res/$scenario
  node_logs "$name" > "$dir/docker-logs.txt"
  dk inspect "$name" > "$dir/inspect.json" 2>&1
  dk exec "$name" systemctl --failed --no-pager > "$dir/failed-units.txt" 2>&1
  dk exec "$name" journalctl --no-pager -n 400 > "$dir/journal.txt" 2>&1
  dk exec "$name" cat /etc/containerd/config.toml > "$dir/config.toml" 2>&1
  dk exec "$name" cat /proc/1/mountinfo > "$dir/mountinfo.txt" 2>&1
}

# has_line TEXT LINE: TEXT holds LINE as a whole line.
has_line() { grep -qxF -- "$2" <<< "$1"; }

# sys_options prints the per-mount and superblock options of /sys in a
# mountinfo text (fields 6 and the last).
sys_options() { awk '$5 == "/sys" {print $6, $NF}' <<< "$1"; }

# check_booted: the assertions every node that should boot must meet.
check_booted() {
  local name=$1 log
  log=$(node_logs "$name")
  if ! grep -qE 'Reached target .*Multi-User System.*' <<< "$log"; then
    fail "$name: no line matching kind's wait regexp 'Reached target .*Multi-User System.*' in the log"
  fi
  if grep -q '^ERROR: ' <<< "$log"; then
    fail "$name: ERROR in the log: $(grep '^ERROR: ' <<< "$log" | head -n 3 | paste -sd'|' -)"
  fi
  local failed state
  failed=$(failed_units "$name")
  state=$(dk exec "$name" systemctl is-system-running 2>&1 | tr -d '\r')
  if [[ -n $failed ]]; then
    fail "$name: systemd $state, failed units: $(awk '{print $1}' <<< "$failed" | paste -sd' ' -)"
  elif [[ $state != running ]]; then
    fail "$name: systemd is '$state', want running"
  fi
}

# boot_node NAME USERNS: docker run of a node as kind runs it, then what
# every booted node must show: systemd running (check_booted), `detected
# cgroup v2` in its log, and `running in a user namespace` logged exactly
# when USERNS is 1. Sets log to the node's log; returns non-zero (the
# scenario failed) only when the node does not come up.
boot_node() {
  local name=$1 userns=$2 t=$SECONDS userns_line="INFO: running in a user namespace (experimental)"
  log=
  if ! kind_run "$name"; then
    fail "docker run failed"
    return 1
  fi
  say "$name: docker run took $((SECONDS - t))s"
  wait_running "$name" || return 1
  log=$(node_logs "$name")
  has_line "$log" "INFO: detected cgroup v2" || fail "no line 'INFO: detected cgroup v2' in the log"
  if ((userns)); then
    has_line "$log" "$userns_line" || fail "no line '$userns_line' in the log"
  elif has_line "$log" "$userns_line"; then
    fail "'running in a user namespace' logged by a node of root Docker"
  fi
  check_booted "$name"
  return 0 # up: the scenario's own checks run, whatever check_booted found
}

# check_dmi: the node's DMI product files are its own (a VM has real ones).
check_dmi() {
  local name=$1 got uuid
  got=$(dk exec "$name" cat /sys/class/dmi/id/product_name 2>&1)
  [[ $got == kind ]] || fail "$name: /sys/class/dmi/id/product_name is '$got', want 'kind'"
  uuid=$(dk exec "$name" cat /kind/product_uuid 2>&1)
  for f in /sys/class/dmi/id/product_uuid /sys/devices/virtual/dmi/id/product_uuid; do
    got=$(dk exec "$name" cat "$f" 2>&1)
    [[ $got == "$uuid" ]] || fail "$name: $f is '$got', want /kind/product_uuid '$uuid'"
  done
}

# differential runs the differential tier (test/e2e, TestDifferential; the
# compiled test binary from the data disk) against the daemon DOCKER_HOST
# names: kind v0.23.0's script and our binary in the same node image, their
# states diffed after the normalisations docs/differences.md documents. The test
# picks the scenarios of this host (cgroup v2, root or rootless Docker).
differential() {
  local out=$res/$scenario/go-test.txt
  (cd "$in/repo/test/e2e" && E2E_NODE_IMAGE=$NODE_IMAGE E2E_DIFF_KIND=$in/kind-v0.23.0 E2E_BOOT_LIMIT=${BOOT_LIMIT}s \
    timeout 1200 "$in/e2e.test" -test.run '^TestDifferential$' -test.v -test.parallel 4 -test.timeout 19m) \
    > "$out" 2>&1 && return 0
  fail "TestDifferential: $(grep -E '^\s*(--- FAIL|FAIL:|.*differs from)' "$out" | head -n 8 | paste -sd'|' -)"
}

# --- the host ------------------------------------------------------------------
# Docker gives a node on a user-defined network the host's search domains:
# the restart scenario checks that they stay one line.
echo 'search vm.example' > /etc/resolv.conf
host_sys=$(sys_options "$(cat /proc/self/mountinfo)")

host_scenario

# --- 1. default node -------------------------------------------------------------
node=kind-vm-default
if ((ready)); then
  begin default-node
  if boot_node "$node" 0; then
    check_dmi "$node"
    node_sys=$(sys_options "$(dk exec "$node" cat /proc/1/mountinfo)")
    [[ $node_sys == ro,* ]] || fail "the node's /sys is not read-only: '$node_sys'"
  fi
  collect "$node"
  end

  begin kubelet-cgroup
  if out=$(dk exec "$node" entrypoint create-kubelet-cgroup-v2 2>&1); then
    for d in /kubelet /kubelet.slice; do
      controllers=$(dk exec "$node" cat "/sys/fs/cgroup$d/cgroup.controllers" 2>&1) \
        || { fail "$d: $controllers"; continue; }
      subtree=$(dk exec "$node" cat "/sys/fs/cgroup$d/cgroup.subtree_control" 2>&1)
      echo "$d: controllers '$controllers', subtree_control '$subtree'" >> "$res/$scenario/cgroups.txt"
      for c in cpu memory pids; do
        [[ " $controllers " == *" $c "* ]] || fail "$d: no $c in cgroup.controllers '$controllers'"
      done
      for c in $controllers; do
        [[ " $subtree " == *" $c "* ]] || fail "$d: $c not in cgroup.subtree_control '$subtree'"
      done
    done
  else
    fail "create-kubelet-cgroup-v2: $out"
  fi
  end

  # --- 2. docker restart ---------------------------------------------------------
  begin restart
  uuid=$(dk exec "$node" cat /kind/product_uuid 2>&1)
  machine_id=$(dk exec "$node" cat /etc/machine-id 2>&1)
  t=$SECONDS
  if dk restart --time 60 "$node" > /dev/null; then
    say "$node: docker restart took $((SECONDS - t))s"
    if wait_running "$node"; then
      got=$(dk exec "$node" cat /kind/product_uuid 2>&1)
      [[ $got == "$uuid" ]] || fail "/kind/product_uuid changed: '$uuid' -> '$got'"
      got=$(dk exec "$node" cat /etc/machine-id 2>&1)
      # a new id shows the entrypoint ran again (fix_machine_id writes a new one on every boot)
      [[ $got != "$machine_id" ]] || fail "/etc/machine-id not regenerated on restart"
      resolv=$(dk exec "$node" cat /etc/resolv.conf 2>&1)
      searches=$(grep -c '^search ' <<< "$resolv")
      if ((searches != 1)) || ! has_line "$resolv" "search vm.example"; then
        fail "want exactly one line 'search vm.example' in /etc/resolv.conf, got: $(paste -sd'|' <<< "$resolv")"
      fi
      nameservers=$(grep -c '^nameserver ' <<< "$resolv")
      ((nameservers == 1)) || fail "$nameservers nameserver lines in /etc/resolv.conf, want 1"
      check_booted "$node"
      check_dmi "$node"
    fi
  else
    fail "docker restart failed"
  fi
  # Never a remount of the shared sysfs superblock (fix_mount remounts only the node's own /sys mount read-only).
  got=$(sys_options "$(cat /proc/self/mountinfo)")
  [[ $got == "$host_sys" ]] || fail "the VM's own /sys changed: '$host_sys' -> '$got'"
  collect "$node"
  end
  dk rm --force --volumes "$node" > /dev/null

  # --- 2b. the script and ours, diffed ---------------------------------------------
  begin differential
  differential
  end
else
  skip default-node "the host setup failed"
  skip kubelet-cgroup "the host setup failed"
  skip restart "the host setup failed"
  skip differential "the host setup failed"
fi

rootless_docker_scenario

# --- 3. rootless node ------------------------------------------------------------
node=kind-vm-rootless
if ((rootless_ready)); then
  begin rootless-node
  if boot_node "$node" 1; then
    # what validate_userns requires, as the node sees it
    controllers=$(dk exec "$node" cat /sys/fs/cgroup/cgroup.controllers 2>&1)
    for c in cpu memory pids; do
      [[ " $controllers " == *" $c "* ]] || fail "no $c in the node's cgroup.controllers '$controllers'"
    done
    config=$(dk exec "$node" cat /etc/containerd/config.toml 2>&1)
    grep -qE '^[[:space:]]*restrict_oom_score_adj = true$' <<< "$config" \
      || fail "no 'restrict_oom_score_adj = true' in /etc/containerd/config.toml"
    # The snapshotter the log announces is the one in config.toml; the
    # default stays only when overlayfs works in the user namespace.
    want=overlayfs
    if change=$(grep -oE '^INFO: changing snapshotter from "[^"]*" to "[^"]*"' <<< "$log"); then
      want=${change%\"}
      want=${want##*\"}
    elif has_line "$log" "INFO: UserNS: kernel does not seem to support overlayfs."; then
      fail "overlayfs judged unusable, but no 'changing snapshotter' line"
    fi
    say "$node: snapshotter $want"
    grep -qE "^[[:space:]]*snapshotter = \"$want\"\$" <<< "$config" \
      || fail "no 'snapshotter = \"$want\"' in /etc/containerd/config.toml"
    # /sys: the read-only remount either worked or its failure was
    # tolerated, as in a user namespace it may be.
    node_sys=$(sys_options "$(dk exec "$node" cat /proc/1/mountinfo)")
    if has_line "$log" "INFO: UserNS: ignoring mount fail"; then
      say "$node: /sys remount failed, tolerated (/sys: $node_sys)"
    elif [[ $node_sys != ro,* ]]; then
      fail "/sys neither read-only ('$node_sys') nor 'INFO: UserNS: ignoring mount fail' logged"
    fi
  fi
  collect "$node"
  end
  dk rm --force --volumes "$node" > /dev/null

  begin rootless-differential
  differential
  end
else
  skip rootless-node "rootless Docker is not ready"
  skip rootless-differential "rootless Docker is not ready"
fi

# --- 4. rootless podman: kind's podman provider --------------------------------------
# The kind CLI (v0.23.0, from the data disk) with KIND_EXPERIMENTAL_PROVIDER=
# podman, run by the rootless user against Debian's podman 4.3 (netavark,
# aardvark-dns, slirp4netns; cgroup v2, the systemd cgroup manager through
# the user's manager). The image has no kubeadm: creation must get through
# "Preparing nodes" and "Writing configuration" and stop at kubeadm init.
podman_cluster=kind-vm-podman
podman_image=localhost/kind-entrypoint-podman/node:${NODE_IMAGE_ID:0:12}
kind_podman() { as_rootless 600 env KIND_EXPERIMENTAL_PROVIDER=podman "$in/kind" "$@"; }

# check_podman_node: what every node of kind's podman provider must show;
# the DNS part is the podman-specific one (no Docker DNS, podman's
# nameservers kept, KIND_DNS_SEARCH applied, names of the other node
# answered by aardvark-dns).
check_podman_node() {
  local name=$1 other=$2 log state failed resolv orig check ip got
  log=$(pm logs "$name" 2>&1 | tr -d '\r')
  grep -qE 'Reached target .*Multi-User System.*' <<< "$log" \
    || fail "$name: no line matching kind's wait regexp 'Reached target .*Multi-User System.*' in the log"
  for want in "INFO: running in a user namespace (experimental)" "INFO: detected cgroup v2"; do
    has_line "$log" "$want" || fail "$name: no line '$want' in the log"
  done
  grep -q '^INFO: no nameserver 127.0.0.11 in /etc/resolv.conf and no ' <<< "$log" \
    || fail "$name: enable_network_magic does not say why it leaves podman's DNS alone"
  if grep -q '^ERROR: ' <<< "$log"; then
    fail "$name: ERROR in the log: $(grep '^ERROR: ' <<< "$log" | head -n 3 | paste -sd'|' -)"
  fi
  state=$(pm exec "$name" systemctl is-system-running 2>&1)
  failed=$(pm exec "$name" systemctl --failed --no-legend --plain --no-pager 2>&1)
  if [[ -n $failed ]]; then
    fail "$name: systemd $state, failed units: $(awk '{print $1}' <<< "$failed" | paste -sd' ' -)"
  elif [[ $state != running ]]; then
    fail "$name: systemd is '$state', want running"
  fi
  resolv=$(pm exec "$name" cat /etc/resolv.conf 2>&1)
  orig=$(pm exec "$name" cat /etc/resolv.conf.original 2>&1)
  [[ $(grep '^nameserver' <<< "$resolv") == "$(grep '^nameserver' <<< "$orig")" && -n $(grep '^nameserver' <<< "$orig") ]] \
    || fail "$name: nameservers changed: '$(paste -sd'|' <<< "$orig")' -> '$(paste -sd'|' <<< "$resolv")'"
  [[ $(grep '^search' <<< "$resolv") == "search podman.example" ]] \
    || fail "$name: search lines '$(grep '^search' <<< "$resolv" | paste -sd'|' -)', want 'search podman.example' (KIND_DNS_SEARCH)"
  ! grep -q '127\.0\.0\.11' <<< "$resolv" || fail "$name: resolv.conf names Docker's embedded DNS"
  ! pm exec "$name" iptables-save -t nat 2>&1 | grep -qE '127\.0\.0\.11|DOCKER_OUTPUT' \
    || fail "$name: Docker DNS rules in a podman node"
  ip=$(pm inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$other" 2>&1)
  got=$(pm exec "$name" getent ahostsv4 "$other" 2>&1 | awk 'NR == 1 {print $1}')
  [[ -n $ip && $got == "$ip" ]] || fail "$name: podman's DNS gives $other as '$got', want '$ip'"
  check=$(pm exec "$name" /usr/local/bin/entrypoint check --json 2>&1)
  echo "$check" > "$res/$scenario/check-$name.json"
  grep -q '"status": "pass"' <<< "$check" || fail "$name: entrypoint check --json gave no rows: $(head -c 200 <<< "$check")"
  if grep -q '"status": "fail"' <<< "$check"; then
    fail "$name: entrypoint check has fail rows: $(grep -B1 '"status": "fail"' <<< "$check" | grep -o '"name": "[^"]*"' | paste -sd' ' -)"
  fi
}

collect_podman() {
  local name=$1 dir=$res/$scenario
  pm logs "$name" 2>&1 | tr -d '\r' > "$dir/$name-logs.txt"
  pm inspect "$name" > "$dir/$name-inspect.json" 2>&1
  pm exec "$name" systemctl --failed --no-pager > "$dir/$name-failed-units.txt" 2>&1
  pm exec "$name" journalctl --no-pager -n 400 > "$dir/$name-journal.txt" 2>&1
  pm exec "$name" cat /proc/1/mountinfo > "$dir/$name-mountinfo.txt" 2>&1
}

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
    printf 'kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  dnsSearch: [podman.example]\nnodes:\n- role: control-plane\n- role: worker\n' \
      > "/home/$rootless_user/kind-podman.yaml"
    t=$SECONDS
    kind_out=$(kind_podman create cluster --name "$podman_cluster" --image "$podman_image" \
      --config "/home/$rootless_user/kind-podman.yaml" --retain --wait 0s 2>&1)
    kind_rc=$?
    echo "$kind_out" > "$res/$scenario/kind-create.txt"
    say "kind create cluster exited $kind_rc after $((SECONDS - t))s"
    ((kind_rc != 0)) || fail "kind create cluster succeeded, but the image has no kubeadm: what ran?"
    # runc and crun word the missing kubeadm differently (Debian's podman
    # picks crun here); exit 127 and podman's own words are both
    for want in "✓ Preparing nodes" "✓ Writing configuration" "✗ Starting control-plane" \
      "kubeadm init --skip-phases=preflight" "failed with error: exit status 127" \
      "OCI runtime attempted to invoke a command that was not found"; do
      grep -qF -- "$want" <<< "$kind_out" || fail "kind output: no '$want' ($(grep -m1 ERROR <<< "$kind_out"))"
    done
    cp_node=$podman_cluster-control-plane worker_node=$podman_cluster-worker
    for pair in "$cp_node $worker_node" "$worker_node $cp_node"; do
      read -r name other <<< "$pair"
      if pm container exists "$name"; then
        check_podman_node "$name" "$other"
        collect_podman "$name"
      else
        fail "kind left no node $name"
      fi
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
  elif kind_run "$node"; then
    start=$SECONDS status=''
    while ((SECONDS - start < EXIT_LIMIT)); do
      status=$(dk inspect -f '{{.State.Status}}' "$node" 2>&1)
      [[ $status == exited ]] && break
      sleep 1
    done
    if [[ $status != exited ]]; then
      fail "the node is still '$status' after ${EXIT_LIMIT}s, want exited"
    else
      read -r code restarts < <(dk inspect -f '{{.State.ExitCode}} {{.RestartCount}}' "$node")
      say "$node: exited with $code after $((SECONDS - start))s, $restarts restarts"
      ((code != 0)) || fail "the node exited 0, want non-zero"
      log=$(node_logs "$node")
      errors=$(grep '^ERROR:' <<< "$log")
      # --restart=on-failure:1: the node runs 1 + restarts times, and each
      # run must print exactly the one error.
      want="ERROR: validate_userns: UserNS: memory controller needs to be delegated"
      runs=$((restarts + 1))
      n=$(grep -c . <<< "$errors")
      if ((n != runs)) || [[ $(sort -u <<< "$errors") != "$want" ]]; then
        fail "want $runs x '$want' (one per run), got $n ERROR lines: $(paste -sd'|' <<< "$errors")"
      fi
      if grep -q 'Reached target' <<< "$log"; then
        fail "init started although the controller check failed"
      fi
    fi
  else
    fail "docker run failed"
  fi
  collect "$node"
  end
else
  skip rootless-no-memory "rootless Docker is not ready"
fi
