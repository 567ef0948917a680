#!/usr/bin/env bash
# Docker 29 tier: kind nodes on Docker 29 with its nftables firewall backend
# and with its iptables one (make e2e-docker29); see README.md. As root:
#   1. installs what is missing (nftables: dockerd runs nft; iptables);
#   2. builds dockerd and docker-proxy (build-engine.sh, the Go module
#      proxy's github.com/moby/moby/v2 at moby_version below), cached by
#      version and recipe; containerd and runc from test/stack/runtime.sh;
#   3. removes what an interrupted run left (engine, mounts, netns);
#   4. for each backend: starts the engine in a network namespace of its
#      own (kind-ep-d29) with a socket, data-root, exec-root and pidfile of
#      its own, asserts its firewall backend; the first time, builds the
#      e2e tier's images in it (test/e2e/run.sh --build-only against this
#      engine); runs go test -tags e2e,docker29 -run TestDocker29
#      ./test/e2e/; stops the engine and removes its netns;
#   5. prints the table of both backends.
# The machine's own Docker is never touched: this engine has its own
# socket, state and network namespace (ENV.md: in nftables mode dockerd
# deletes another engine's iptables chains in its namespace).
# Environment: D29_GO_TEST_ARGS (extra `go test` arguments),
# D29_BACKENDS (default "nftables iptables"), D29_STATE_DIR (default
# /var/cache/kind-entrypoint-docker29), E2E_BOOT_LIMIT (default 120s).
#
# `run.sh --cluster` (make e2e-docker29-cluster) runs kind's cluster shapes
# on this engine instead of step 4's node tests: for each backend, the
# cluster tier's matrix (test/cluster/run.sh --matrix with
# CLUSTER_DOCKER_HOST: its images built in the machine's Docker and loaded
# into this engine), the shapes D29_CLUSTER_RUN_<BACKEND> names (a go test
# -run pattern; defaults below), then the tables of both backends.
set -o errexit -o nounset -o pipefail

cluster=0
case ${1:-} in
  "") ;;
  --cluster) cluster=1 ;;
  *) echo "usage: $0 [--cluster]" >&2; exit 2 ;;
esac

# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
tier_init docker29 "${D29_STATE_DIR:-/var/cache/kind-entrypoint-docker29}"
here=test/docker29
moby_version=v2.0.0-beta.24 # Docker 29.x
netns=kind-ep-d29
run_dir=/run/kind-entrypoint-docker29
data_root=/var/lib/kind-entrypoint-docker29
cgroup_parent=kind-entrypoint-docker29
sock=$run_dir/docker.sock
export DOCKER_HOST=unix://$sock DOCKER_BUILDKIT=0
tier_lock "$state/lock"

# --- 1. packages -------------------------------------------------------------
missing=()
command -v nft > /dev/null || missing+=(nftables)
command -v iptables > /dev/null || missing+=(iptables)
command -v debootstrap > /dev/null || missing+=(debootstrap)
apt_install "$log_dir/apt.log" "${missing[@]}"
# Docker 29 refuses API versions below 1.44: Debian's docker.io (20.10)
# client is too old for it.
api=$(docker version --format '{{.Client.APIVersion}}' 2> /dev/null) || true
[[ $api =~ ^1\.([0-9]+)$ ]] && ((BASH_REMATCH[1] >= 44)) \
  || die "a docker client of API 1.44 or later is needed on PATH (found '${api:-none}'); Docker 25+ has one"

# --- 2. the engine -----------------------------------------------------------
engine=$state/engine-$moby_version-$(cat "$here/build-engine.sh" | sha256sum | cut -c1-12)
t=$(date +%s)
if [[ -x $engine/dockerd && -x $engine/docker-proxy ]]; then
  log "engine $engine present"
else
  log "building dockerd and docker-proxy of github.com/moby/moby/v2 $moby_version (cold: 11 to 48 minutes on 2 cores, by their load; log: $log_dir/build-engine.log)"
  bash "$here/build-engine.sh" "$moby_version" "$engine" > "$log_dir/build-engine.log" 2>&1 \
    || { grep -v '^go: downloading' "$log_dir/build-engine.log" | tail -n 30 >&2; die "building the engine failed"; }
  find "$state" -maxdepth 1 -name 'engine-*' ! -path "$engine" -exec rm -rf {} +
fi
log "engine ready in $(since "$t")"
rt=$(bash test/stack/runtime.sh) || die "building containerd and runc (test/stack/runtime.sh) failed"

# --- 3. the engine's start, stop and leftovers -------------------------------
# engine_pid: the pid of our dockerd, if one runs (its pidfile names a
# process whose binary is ours).
engine_pid() {
  local pid
  pid=$(cat "$run_dir/dockerd.pid" 2> /dev/null) || return 1
  [[ $(readlink "/proc/$pid/exe" 2> /dev/null) == "$state"/engine-*/dockerd ]] && printf '%s\n' "$pid"
}

# stop_engine: stops our dockerd (it stops its containers and its
# containerd), then unmounts what it left under its directories, removes
# its network namespace (its bridges and rules go with it) and its empty
# cgroups. Safe when nothing runs.
stop_engine() {
  local pid mounts
  if pid=$(engine_pid); then
    log "stopping dockerd $pid"
    kill -TERM "$pid"
    for _ in $(seq 120); do
      [[ -e /proc/$pid ]] || break
      sleep 0.5
    done
    [[ ! -e /proc/$pid ]] || { log "dockerd $pid still runs after 60s: killing it"; kill -KILL "$pid"; }
  fi
  mapfile -t mounts < <(findmnt -rn -o TARGET | grep -E "^($run_dir|$data_root)(/|$)" | sort -r)
  if ((${#mounts[@]})); then
    log "unmounting ${#mounts[@]} mounts the engine left"
    umount -l "${mounts[@]}"
  fi
  if ip netns list | grep -qw "^$netns"; then ip netns del "$netns"; fi
  find /sys/fs/cgroup -mindepth 1 -maxdepth 3 -type d -name "$cgroup_parent" 2> /dev/null \
    | while read -r dir; do find "$dir" -depth -type d -exec rmdir {} + 2> /dev/null || true; done
  rm -rf "$run_dir"
}

# start_engine BACKEND: dockerd with the firewall backend BACKEND in the
# network namespace $netns (made anew, loopback up: Docker's embedded DNS
# and the networks' gateways are all the nodes need), answering on $sock.
# The data-root is kept between runs and backends (the images).
start_engine() {
  local backend=$1 got t
  t=$(date +%s)
  mkdir -p "$run_dir" "$data_root"
  ip netns add "$netns"
  ip -n "$netns" link set lo up
  # IPv6 networks (kind's): Docker 29 refuses to create one while the
  # namespace forwards no IPv6, where a host's Docker has it set.
  ip netns exec "$netns" sysctl -q -w net.ipv6.conf.all.forwarding=1 net.ipv6.conf.default.forwarding=1
  cat > "$run_dir/daemon.json" << JSON
{
  "hosts": ["unix://$sock"],
  "data-root": "$data_root",
  "exec-root": "$run_dir/exec",
  "pidfile": "$run_dir/dockerd.pid",
  "cgroup-parent": "$cgroup_parent",
  "firewall-backend": "$backend"
}
JSON
  PATH="$engine:$rt:$PATH" start_daemon "$log_dir/dockerd-$backend.log" \
    setsid nsenter --net="/run/netns/$netns" dockerd --config-file "$run_dir/daemon.json"
  for _ in $(seq 120); do
    docker info > /dev/null 2>&1 && break
    sleep 0.5
  done
  docker info > /dev/null 2>&1 || { tail -n 30 "$log_dir/dockerd-$backend.log" >&2; die "dockerd did not answer within 60s"; }
  got=$(docker info --format '{{json .FirewallBackend}}')
  [[ $(docker info --format '{{.FirewallBackend.Driver}}') == "$backend" ]] \
    || die "the engine's firewall backend is $got, not $backend"
  log "dockerd $(docker info --format '{{.ServerVersion}}') up in $(since "$t"), firewall backend $got"
}

stop_engine
trap 'stop_engine' EXIT

# --- 4. each backend ---------------------------------------------------------
export E2E_BOOT_LIMIT=${E2E_BOOT_LIMIT:-120s}
backends=${D29_BACKENDS:-nftables iptables}
rows=$state/table
rm -rf "$rows"
mkdir -p "$rows"
rc=0 built=0
if ((cluster)); then
  # What each backend runs, as go test -run patterns: the shapes each
  # image must pass, and those in which kind's script must fail. On
  # nftables ours must pass every shape and the script must lose DNS (it
  # restores no rule there: its workers cannot even resolve the control
  # plane to join it); the IPv4 shape is its control, the others fail
  # the same way and take 6 minutes each (kubeadm join's timeout). On
  # iptables both pass the IPv4 shape, as on today's engines.
  declare -A pass=([nftables]='^TestMatrix$/^(ipv4|ipv6|dual|ha)$/^ours$' [iptables]='^TestMatrix$/^ipv4$/')
  declare -A fail=([nftables]='^TestMatrix$/^ipv4$/^script$' [iptables]='')
  cluster_log=/var/log/kind-entrypoint-cluster
  # matrix BACKEND RUN OUT: the cluster tier's matrix, the shapes RUN
  # names, in this engine; its table to OUT, its output to OUT.log.
  matrix() {
    local t status=0
    t=$(date +%s)
    rm -f "$cluster_log/matrix.md"
    # The cluster tier builds in the machine's Docker (DOCKER_HOST unset)
    # and creates its clusters in this engine (CLUSTER_DOCKER_HOST).
    env -u DOCKER_HOST CLUSTER_DOCKER_HOST="unix://$sock" CLUSTER_MATRIX_ENGINE="Docker 29 $1" \
      CLUSTER_MATRIX_CREATES=1 CLUSTER_MATRIX_RESTARTS="${CLUSTER_MATRIX_RESTARTS:-1}" \
      CLUSTER_GO_TEST_ARGS="-run $2" bash test/cluster/run.sh --matrix 9>&- 2>&1 | tee "$3.log" || status=$?
    cp "$cluster_log/matrix.md" "$3" 2> /dev/null || echo "| Docker 29 $1 | (no table for $2: see $3.log) |" > "$3"
    log "the cluster matrix $2 on $1 finished in $(since "$t") (exit $status)"
    return "$status"
  }
  for backend in $backends; do
    run_var=D29_CLUSTER_RUN_${backend^^} fail_var=D29_CLUSTER_FAIL_${backend^^}
    run=${!run_var-${pass[$backend]:-}} control=${!fail_var-${fail[$backend]:-}}
    [[ -n $run$control ]] || die "no shapes for backend $backend: set $run_var or $fail_var"
    start_engine "$backend"
    if [[ -n $run ]]; then
      matrix "$backend" "$run" "$rows/$backend-pass" || rc=1
    fi
    if [[ -n $control ]]; then
      # The control must fail, and for the reason: every row of the
      # script with a FAIL, and the log a lookup of a node's name at the
      # node's nameserver that got no answer, or a pod's names check
      # through Docker's DNS that failed.
      if matrix "$backend" "$control" "$rows/$backend-fail"; then
        log "FAIL: kind's script passed $control on $backend, where it restores no DNS rule"
        rc=1
      elif tail -n +3 "$rows/$backend-fail" | grep -qv FAIL; then
        log "FAIL: a row of kind's script on $backend has no FAIL: $(tail -n +3 "$rows/$backend-fail" | grep -v FAIL)"
        rc=1
      elif ! grep -Eq "lookup [^ ]+ on [0-9.]+:53: .*(refused|timeout)|through CoreDNS and Docker's DNS: .*(refused|timeout|no such host|server misbehaving)" "$rows/$backend-fail.log"; then
        log "FAIL: kind's script failed $control on $backend, but not on DNS (see $rows/$backend-fail.log)"
        rc=1
      else
        log "kind's script failed $control on $backend, as it must: $(grep -Eom1 "lookup [^ ]+ on [0-9.]+:53: [^\"]*" "$rows/$backend-fail.log" || true)"
      fi
    fi
    stop_engine
  done
  {
    for f in "$rows"/*; do
      [[ $f == *.log ]] || { head -n 2 "$f"; break; }
    done
    for backend in $backends; do
      for f in "$rows/$backend-pass" "$rows/$backend-fail"; do [[ ! -f $f ]] || tail -n +3 "$f"; done
    done
  } >&2
  log "whole tier $(since "$tier_start") (exit $rc)"
  exit "$rc"
fi
for backend in $backends; do
  start_engine "$backend"
  if ((!built)); then
    # The e2e tier's images, built in this engine (the data-root keeps
    # them): its run.sh leaves an engine that DOCKER_HOST names alone.
    t=$(date +%s)
    E2E_NODE_IMAGE=$(E2E_STATE_DIR=$state/e2e bash test/e2e/run.sh --build-only) || die "building the node image (test/e2e/run.sh --build-only) failed"
    export E2E_NODE_IMAGE
    built=1
    log "node image $E2E_NODE_IMAGE ready in $(since "$t")"
  fi
  t=$(date +%s) status=0
  # shellcheck disable=SC2086 # D29_GO_TEST_ARGS is a list of arguments
  D29_BACKEND=$backend D29_TABLE=$rows/$backend go test -tags e2e,docker29 -v -count=1 -timeout 20m \
    -run '^TestDocker29$' ${D29_GO_TEST_ARGS:-} ./test/e2e/ || status=$?
  log "go test on $backend finished in $(since "$t") (exit $status)"
  ((status == 0)) || rc=$status
  stop_engine
done

# --- 5. the table ------------------------------------------------------------
{
  echo "| backend | image | boot | resolv.conf | DNS node | DNS pod | after restart: boot | DNS node | DNS pod |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for backend in $backends; do cat "$rows/$backend" 2> /dev/null || echo "| $backend | (no row: see the test's log) |"; done
} >&2
log "whole tier $(since "$tier_start") (exit $rc)"
exit "$rc"
