#!/usr/bin/env bash
# Benchmarks (what `make bench` runs, after `make build`): the Go
# benchmarks, then the end-to-end ones in Docker; writes bench/results.md.
#
#   1. go test -run '^$' -bench . -benchmem -count 3 ./...   (Detect+Plan per fake host, ...)
#   2. test/e2e/run.sh --build-only: what the e2e tier needs, from a fresh
#      Debian 12 machine (docker.io, dockerd, the runtime shim where the
#      capability bounding set is short, the base and node images made from
#      bin/entrypoint);
#   3. go test -tags e2ebench -bench . -benchtime ${BENCH_NODES}x ./test/e2e/
#      (boot times, programs before init, peak RSS, binary size), holding
#      the e2e tier's lock so that no tier shares the machine meanwhile;
#   4. go run ./bench/report: bench/results.md.
#
# Environment: BENCH_NODES (nodes per end-to-end benchmark, default 10),
# BENCH_COUNT (runs of each Go benchmark, default 3; the report takes the median),
# BENCH_E2E=0 (the Go benchmarks only), BENCH_OUT (default
# bench/results.md), E2E_BENCH_REFERENCE (the reference bash entrypoint;
# default: kind v0.23.0's, from its Go module, which `go mod download`
# fetches like any module), E2E_STATE_DIR (as test/e2e/run.sh).
set -o errexit -o nounset -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

nodes=${BENCH_NODES:-10}
count=${BENCH_COUNT:-3}
out=${BENCH_OUT:-bench/results.md}
state=${E2E_STATE_DIR:-/var/cache/kind-entrypoint-e2e}
label=kind-entrypoint-bench

# shellcheck source=test/lib.sh
source test/lib.sh
tier_name=bench # not tier_init: the Go benchmarks need no root

[[ -d /usr/local/go/bin ]] && export PATH="$PATH:/usr/local/go/bin"
command -v go > /dev/null || die "go not found (Go 1.26 is expected at /usr/local/go)"
[[ -x bin/entrypoint ]] || die "bin/entrypoint missing: make build"
export CGO_ENABLED=0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
load=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)

# --- 1. Go benchmarks ----------------------------------------------------------
log "Go benchmarks (-count $count)"
go test -run '^$' -bench . -benchmem -count "$count" ./... | tee "$work/micro.txt"

# --- 2-3. end to end -----------------------------------------------------------
e2e_args=()
if [[ ${BENCH_E2E:-1} != 0 ]]; then
  [[ $(id -u) == 0 ]] || die "the end-to-end benchmarks need root (as test/e2e/run.sh); BENCH_E2E=0 skips them"
  if [[ -z ${E2E_BENCH_REFERENCE:-} ]]; then
    # kind's module holds its node image's files, the entrypoint among them.
    kind_dir=$(module_dir sigs.k8s.io/kind@v0.23.0) || die "go mod download sigs.k8s.io/kind@v0.23.0 failed (or set E2E_BENCH_REFERENCE)"
    export E2E_BENCH_REFERENCE=$kind_dir/images/base/files/usr/local/bin/entrypoint
  fi
  [[ -s $E2E_BENCH_REFERENCE ]] || die "no reference script at $E2E_BENCH_REFERENCE"
  log "end-to-end setup: test/e2e/run.sh --build-only"
  bash test/e2e/run.sh --build-only > /dev/null

  # Leftovers of an interrupted run.
  mapfile -t stale < <(docker ps -aq --filter "label=$label")
  ((${#stale[@]} == 0)) || docker rm -f -v "${stale[@]}" > /dev/null
  mapfile -t stale < <(docker network ls -q --filter "label=$label")
  ((${#stale[@]} == 0)) || docker network rm "${stale[@]}" > /dev/null

  log "end-to-end benchmarks, $nodes nodes each (waiting for the e2e lock if a tier runs)"
  tier_lock "$state/lock"
  E2E_BENCH_DETAILS="$work/details.json" \
    go test -tags e2ebench -run '^$' -bench . -benchtime "${nodes}x" -timeout 60m ./test/e2e/ 9>&- \
    | tee "$work/e2e.txt"
  exec 9>&-
  e2e_args=(-e2e "$work/e2e.txt" -details "$work/details.json"
    -docker "$(docker version -f '{{.Server.Version}}' 2> /dev/null || echo unknown)")
fi

# --- 4. report -----------------------------------------------------------------
load="at start $load, at end $(cut -d' ' -f1-3 /proc/loadavg)"
go run ./bench/report -micro "$work/micro.txt" "${e2e_args[@]}" \
  -commit "$(git describe --always --dirty 2> /dev/null || echo unknown)" \
  -go "$(go env GOVERSION)" -load "$load" > "$work/results.md"
mv "$work/results.md" "$out"
log "wrote $out in $(($(date +%s) - start))s"
