#!/bin/bash
# The VM tier's guest side. Runs inside the VM at boot (kind-vm-tier.service,
# see test/vm/disk), on a Debian bookworm host with cgroup v2 and no network,
# from the data disk that test/vm/run.sh builds: node.tar (`docker save` of
# the node image), kind (the kind CLI), vm.env, this script and the suite's
# script, SUITE.sh: nodes.sh (make e2e-vm) or cluster.sh (make
# e2e-vm-cluster). This script holds what both suites share: the
# assertions, the daemons, the vm-host and rootless-docker scenarios, and
# the end (the results disk and the warm disk's "clean").
#
# Each scenario ends with one line in $res/summary:
#   PASS: NAME (Ns)
#   FAIL: NAME (Ns): what failed; what else failed
# and leaves what explains it in $res/NAME/ (container log, inspect, failed
# units, the node's journal). At the end $res is written as a tar archive to
# the results disk (raw, no filesystem), which the host reads. Progress goes
# to the console (the serial log) as "vm-tier: " lines.
set -o nounset -o pipefail

in=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
res=/var/tmp/vm-results
out_disk=/dev/disk/by-id/virtio-kindvm-out
# shellcheck source=/dev/null # written by test/vm/run.sh
. "$in/vm.env" # SUITE NODE_IMAGE NODE_IMAGE_ID, and the suite's settings
rootless_user=rootless
rootless_uid=$(id -u "$rootless_user")
rootless_sock=unix:///run/user/$rootless_uid/docker.sock
user_unit=user@$rootless_uid.service
user_cgroup=/sys/fs/cgroup/user.slice/user-$rootless_uid.slice/$user_unit

# A warm disk (see the end) still holds the results of the run that made it.
rm -rf "$res"
mkdir -p "$res"
say() { echo "vm-tier: $*"; }

# save_results writes $res to the results disk. end does it after every
# scenario, so that a VM the host kills at VM_TIMEOUT still leaves the
# scenarios it finished.
save_results() { tar -C "$res" -cf "$out_disk" . && sync; }

# finish writes the results disk however the script ends; only a complete
# run writes the final "done" line the host looks for.
finish() {
  journalctl --no-pager -b > "$res/vm-journal.txt" 2>&1
  say "writing results to $out_disk"
  save_results
  say "finished after $(cut -d' ' -f1 /proc/uptime)s"
}
trap finish EXIT

# --- assertions ----------------------------------------------------------------
scenario='' scenario_start=0 problems=()

begin() {
  scenario=$1 scenario_start=$SECONDS problems=()
  mkdir -p "$res/$scenario"
  say "== $scenario"
}

# fail records one failed assertion of the current scenario (one line).
fail() {
  problems+=("$*")
  say "$scenario: FAIL: $*"
}

end() {
  local took=$((SECONDS - scenario_start)) line
  if ((${#problems[@]})); then
    line="FAIL: $scenario (${took}s): $(printf '%s; ' "${problems[@]}")"
    line=${line%; }
  else
    line="PASS: $scenario (${took}s)"
  fi
  echo "$line" >> "$res/summary"
  say "$line"
  save_results
}

# skip ends a scenario that cannot run because an earlier one failed: that
# is a failure too, never a pass.
skip() {
  begin "$1"
  fail "not run: $2"
  end
}

# dk is the docker CLI with a time limit; DOCKER_HOST picks the daemon.
dk() { timeout 300 docker "$@"; }

# load_image loads the node image into the daemon DOCKER_HOST names and
# checks that the name now means the image the host saved: a warm disk holds
# an earlier one under the same name. Loading takes minutes under emulation
# (layer extraction and digests), so it has its own time limit.
load_image() {
  local what=$1 t=$SECONDS out id
  if ! out=$(timeout 900 docker load -q -i "$in/node.tar" 2>&1); then
    fail "docker load ($what): $out"
    return 1
  fi
  id=$(dk image inspect -f '{{.Id}}' "$NODE_IMAGE" 2>&1)
  if [[ $id != "sha256:$NODE_IMAGE_ID" ]]; then
    fail "after docker load ($what), $NODE_IMAGE is '$id', want sha256:$NODE_IMAGE_ID"
    return 1
  fi
  say "node image loaded ($what) in $((SECONDS - t))s"
}

# user_systemctl runs systemctl in the rootless user's manager (lingering:
# logind started it at boot).
user_systemctl() { timeout 120 systemctl --user -M "$rootless_user@" "$@"; }

# start_rootless starts the user's rootless dockerd (the unit
# dockerd-rootless-setuptool.sh would write) and waits for it to answer.
start_rootless() {
  local t=$SECONDS
  user_systemctl start docker.service || return 1
  for _ in $(seq 120); do
    DOCKER_HOST=$rootless_sock dk info > /dev/null 2>&1 && break
    sleep 1
  done
  DOCKER_HOST=$rootless_sock dk info > "$res/$scenario/docker-info.txt" 2>&1 || return 1
  say "rootless dockerd up in $((SECONDS - t))s"
}

# as_rootless runs a command as the rootless user, in the environment of the
# user's (lingering) manager: podman reaches it over the user's D-Bus.
as_rootless() {
  local limit=$1
  shift
  (cd "/home/$rootless_user" && timeout "$limit" runuser -u "$rootless_user" -- env \
    HOME="/home/$rootless_user" XDG_RUNTIME_DIR="/run/user/$rootless_uid" \
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$rootless_uid/bus" "$@")
}
pm() { as_rootless 300 podman "$@"; }

# host_scenario: vm-host. Root Docker answers, with the node image loaded
# and the network "kind" made. Sets ready (1: the suite's root scenarios
# can run).
host_scenario() {
  ready=1
  begin vm-host
  [[ -f /sys/fs/cgroup/cgroup.controllers ]] || fail "the VM is not on cgroup v2 (no /sys/fs/cgroup/cgroup.controllers)"
  for _ in $(seq 120); do
    dk info > /dev/null 2>&1 && break
    sleep 1
  done
  dk info > "$res/$scenario/docker-info.txt" 2>&1 || fail "Docker (root) does not answer"
  load_image root
  dk network create kind > /dev/null || fail "docker network create kind failed"
  ((${#problems[@]})) && ready=0
  end
}

# rootless_docker_scenario: rootless-docker. The user's rootless dockerd
# started, with the node image loaded and the network "kind" made; exports
# DOCKER_HOST for it. Sets rootless_ready.
rootless_docker_scenario() {
  begin rootless-docker
  rootless_ready=0
  for _ in $(seq 60); do
    systemctl is-active --quiet "$user_unit" && break
    sleep 1
  done
  cat "$user_cgroup/cgroup.controllers" > "$res/$scenario/user-controllers.txt" 2>&1
  if ! systemctl is-active --quiet "$user_unit"; then
    fail "$user_unit (lingering) is not active"
  elif ! start_rootless; then
    fail "rootless dockerd did not start: $(journalctl --no-pager -n 5 _UID="$rootless_uid" | paste -sd'|' -)"
  else
    export DOCKER_HOST=$rootless_sock
    grep -q rootless "$res/$scenario/docker-info.txt" || fail "the daemon at $DOCKER_HOST is not rootless"
    if load_image rootless; then
      dk network create kind > /dev/null || fail "docker network create kind failed"
    fi
    ((${#problems[@]})) || rootless_ready=1
  fi
  end
}

# host_network gives the guest what every host a user runs kind on has: an
# interface with an address and a default route, in both families (the VM
# has no NIC: -nic none, nothing leaves it). The addresses are the
# documentation ranges (RFC 5737, RFC 3849); nothing answers there.
# Without it, rootless podman 5's network (pasta, podman's default since
# 5.0) has no interface to copy, falls back to its local mode, and passt
# 2025-05 fails every container in it: "pasta failed with exit code 1:
# Couldn't set IPv4 route(s) in guest: Invalid argument" (podman#22190 saw
# the same at boot, before the network was up).
host_network() {
  ip link add kindvm0 type dummy \
    && ip link set kindvm0 up \
    && ip address add 192.0.2.10/24 dev kindvm0 \
    && ip route add default via 192.0.2.1 dev kindvm0 \
    && ip -6 address add 2001:db8::10/64 dev kindvm0 nodad \
    && ip -6 route add default via 2001:db8::1 dev kindvm0 \
    || say "WARN: no host network (kindvm0): rootless podman's pasta will fail"
}
host_network

say "guest up after $(cut -d' ' -f1 /proc/uptime)s: $(uname -r), $(systemctl --version | head -n 1)"
# shellcheck source=/dev/null # nodes.sh or cluster.sh, beside this script
. "$in/$SUITE.sh"

echo "done" >> "$res/summary"

# --- a warm disk -----------------------------------------------------------------
# The host keeps this VM's disk for later runs (with the same base layer)
# when it stops clean: no container or network left (Docker's and rootless
# podman's), both daemons stopped.
# Their `docker load` then finds the big layers present, which saves
# minutes. Only the loaded images stay behind.
clean_daemon() {
  local ids
  ids=$(dk ps -aq) || return 1
  # shellcheck disable=SC2086 # a list of ids
  [[ -z $ids ]] || dk rm --force --volumes $ids > /dev/null || return 1
  ! dk network inspect kind > /dev/null 2>&1 || dk network rm kind > /dev/null
}
if DOCKER_HOST=unix:///run/docker.sock clean_daemon \
  && DOCKER_HOST=$rootless_sock clean_daemon \
  && [[ -z $(pm ps -aq) && -z $(pm volume ls -q) ]] && ! pm network exists kind \
  && user_systemctl stop docker.service \
  && systemctl stop docker.service docker.socket containerd.service; then
  echo "clean" >> "$res/summary"
fi
