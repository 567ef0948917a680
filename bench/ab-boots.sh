#!/usr/bin/env bash
# Compares the boot time of two entrypoint binaries: boots default nodes
# (kind's docker run flags, no tty, Debian's default nft alternatives as
# in kind's base image) one after another, alternating A and B, ROUNDS
# times each, and prints per binary the median and range of
# "INFO: starting init" - StartedAt and of "pre-init finished in N ms".
# Alternating spreads the machine's other load over both; still, on our
# shared 2-core machines two runs of 40 boots can disagree by 2-3 ms, so
# run it more than once. The numbers of docs/performance.md come from
# ROUNDS=40 runs of bin/entrypoint against a build that skipped the syncs
# of the files rederived every start, and against one that planned no
# iptables-restore. Not part of make bench. Needs root and what
# test/e2e/run.sh needs.
#
# usage: bench/ab-boots.sh BINARY_A BINARY_B   (env ROUNDS=15)
set -o errexit -o nounset -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(($# == 2)) || { echo "usage: $0 BINARY_A BINARY_B" >&2; exit 2; }
bins=("$(realpath "$1")" "$(realpath "$2")")
rounds=${ROUNDS:-15}
label=kind-entrypoint-ab-boots
cd "$repo"

[[ -x bin/entrypoint ]] || make build > /dev/null
base=$(bash test/e2e/run.sh --build-only)
work=$(mktemp -d)
net=kind-ep-ab-boots
docker network create --label "$label" "$net" > /dev/null
cleanup() {
  mapfile -t left < <(docker ps -aq --filter "label=$label")
  ((${#left[@]} == 0)) || docker rm -f -v "${left[@]}" > /dev/null
  docker network rm "$net" > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

images=()
for i in 0 1; do
  mkdir "$work/$i"
  cp "${bins[$i]}" "$work/$i/entrypoint"
  printf '%s\n' "FROM $base" \
    "RUN update-alternatives --auto iptables && update-alternatives --auto ip6tables" \
    "COPY entrypoint /entrypoint" "COPY entrypoint /usr/local/bin/entrypoint" > "$work/$i/Dockerfile"
  images+=("kind-entrypoint-ab-boots/$i:dev")
  DOCKER_BUILDKIT=0 docker build -q -t "${images[$i]}" "$work/$i" > /dev/null 2> "$work/build.log" \
    || { cat "$work/build.log" >&2; exit 1; }
done

# One line per boot: which binary, StartedAt, then the two log lines with
# their timestamps.
for ((r = 0; r < rounds; r++)); do
  for i in 0 1; do
    name=kind-ep-ab-boots-$r-$i
    docker run --detach --name "$name" --hostname "$name" --label "$label" --network "$net" \
      --privileged --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
      --tmpfs /tmp --tmpfs /run --volume /var --volume /lib/modules:/lib/modules:ro \
      --init=false --cgroupns=private "${images[$i]}" > /dev/null
    for _ in $(seq 50); do
      docker logs "$name" 2>&1 | grep -q 'INFO: starting init' && break
      sleep 0.1
    done
    started=$(docker inspect -f '{{.State.StartedAt}}' "$name")
    echo "$i $started $(docker logs -t "$name" 2>&1 | grep -E 'INFO: (starting init|pre-init finished)' | tr '\n' ' ')"
    docker rm -f -v "$name" > /dev/null
  done
done > "$work/boots"

# Timestamps are RFC 3339 with nanoseconds; seconds within the day are
# enough for differences under a minute.
awk -v a="${bins[0]}" -v b="${bins[1]}" '
function secs(ts,   t) { split(ts, t, "T"); split(t[2], t, ":"); return t[1] * 3600 + t[2] * 60 + t[3] }
function median(v, n,   i, j, x) {
  for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
  return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{
  k = $1; start = secs(substr($2, 1, length($2) - 1))
  for (f = 3; f <= NF; f++) {
    if ($f == "init" && $(f - 1) == "starting") init = secs(substr($(f - 3), 1, length($(f - 3)) - 1))
    if ($f == "ms" && $(f - 2) == "in") pre = $(f - 1)
  }
  n[k]++; ov[k, n[k]] = (init - start) * 1000; pr[k, n[k]] = pre
}
END {
  for (k = 0; k <= 1; k++) {
    if (!n[k]) continue
    lo = 1e9; hi = -1e9
    for (i = 1; i <= n[k]; i++) { o[i] = ov[k, i]; p[i] = pr[k, i]; lo = o[i] < lo ? o[i] : lo; hi = o[i] > hi ? o[i] : hi }
    printf "%s: %d boots; starting init - StartedAt median %.1f ms (%.1f to %.1f); pre-init median %.1f ms\n",
      (k ? b : a), n[k], median(o, n[k]), lo, hi, median(p, n[k])
  }
}' "$work/boots"
