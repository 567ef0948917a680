#!/usr/bin/env bash
# Which log lines systemd's console flush drops, for each --tty-settle:
# boots PARALLEL nodes at once (kind's docker run flags, --tty), ROUNDS
# times per settle value, with LOAD busy loops on the machine, and counts
# the nodes whose `docker logs` lacks one of the entrypoint's lines. The
# numbers in docs/performance.md ("The last lines on a tty") come from
#   LOAD=4 bench/lost-lines.sh 0 2ms 10ms 30ms 100ms   (2 cores, load ~9)
#   LOAD=0 bench/lost-lines.sh 0 10ms                   (load ~2)
# Not part of make bench (it takes minutes per value). Needs root and what
# test/e2e/run.sh needs; the node image is built from bin/entrypoint.
#
# usage: bench/lost-lines.sh SETTLE...   (env PARALLEL=8 ROUNDS=5 LOAD=0)
set -o errexit -o nounset -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
(($# > 0)) || { echo "usage: $0 SETTLE... (e.g. 0 10ms 100ms)" >&2; exit 2; }
par=${PARALLEL:-8} rounds=${ROUNDS:-5} load=${LOAD:-0}
label=kind-entrypoint-lost-lines

[[ -x bin/entrypoint ]] || make build > /dev/null
image=$(bash test/e2e/run.sh --build-only)
net=kind-ep-lost-lines
docker network create --label "$label" "$net" > /dev/null
busy=()
cleanup() {
  ((${#busy[@]} == 0)) || kill "${busy[@]}" 2> /dev/null || true
  mapfile -t left < <(docker ps -aq --filter "label=$label")
  ((${#left[@]} == 0)) || docker rm -f -v "${left[@]}" > /dev/null
  docker network rm "$net" > /dev/null 2>&1 || true
}
trap cleanup EXIT
for ((i = 0; i < load; i++)); do
  (while :; do :; done) &
  busy+=($!)
done

# The lines every default node logs, in order; "pre-init finished" and
# "starting init" are the last two.
want=("INFO: detected cgroup v1" "INFO: setting iptables to detected mode" "INFO: pre-init finished in" "INFO: starting init")
for settle in "$@"; do
  lost=0 total=0
  for ((r = 1; r <= rounds; r++)); do
    names=() pids=()
    for ((i = 1; i <= par; i++)); do
      n=kind-ep-lost-$r-$i
      names+=("$n")
      docker run -d --name "$n" --label "$label" --hostname "$n" --network "$net" \
        --privileged --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
        --tmpfs /tmp --tmpfs /run --volume /var --volume /lib/modules:/lib/modules:ro \
        --restart=on-failure:1 --init=false --cgroupns=private --tty \
        --entrypoint /entrypoint "$image" --tty-settle="$settle" /sbin/init > /dev/null &
      pids+=($!)
    done
    wait "${pids[@]}"
    sleep 12 # every node has reached init (or failed) by then
    for n in "${names[@]}"; do
      total=$((total + 1))
      log=$(docker logs "$n" 2>&1 | tr -d '\r')
      missing=()
      for w in "${want[@]}"; do
        grep -qF "$w" <<< "$log" || missing+=("$w")
      done
      if ((${#missing[@]})); then
        lost=$((lost + 1))
        printf '%s: missing %s\n' "$n" "$(printf '[%s]' "${missing[@]}")"
      fi
    done
    docker rm -f -v "${names[@]}" > /dev/null
  done
  echo "--tty-settle=$settle: $lost of $total nodes lost lines (PARALLEL=$par ROUNDS=$rounds LOAD=$load, load average $(cut -d' ' -f1 /proc/loadavg))"
done
