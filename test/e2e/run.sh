#!/usr/bin/env bash
# End-to-end tier: real kind node containers in Docker (what `make e2e` runs).
#
# Works from a fresh Debian 12 machine as root, with no stdin and no image
# registry, and is idempotent:
#   1. installs what is missing (docker.io, debootstrap, iptables);
#   2. where the capability bounding set is short (docker run --privileged
#      then fails with "unable to apply caps"), installs the OCI runtime shim
#      (test/e2e/runtimeshim) as Docker's default runtime;
#   3. starts dockerd in the background when no daemon answers;
#   (none of 1-3 for an engine that DOCKER_HOST names: the caller's);
#   4. builds the base image with debootstrap, cached by a hash of its inputs;
#   5. builds the packaging image (./Dockerfile, from bin/entrypoint, which
#      `make build` makes) and the node image (test/e2e/node);
#   6. runs the Go tests: go test -tags e2e ./test/e2e/.
#
# `run.sh --build-only` stops after step 5 and prints the node image's name
# on stdout (the VM tier, test/vm/run.sh, loads that same image into its VM).
#
# Environment: E2E_DEBIAN_MIRROR (debootstrap mirror, default Debian's),
# E2E_GO_TEST_ARGS (extra `go test` arguments, e.g. "-run TestDefaultNode"),
# E2E_STATE_DIR (default /var/cache/kind-entrypoint-e2e).
set -o errexit -o nounset -o pipefail

build_only=0
case ${1:-} in
  "") ;;
  --build-only) build_only=1 ;;
  *) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac

# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
tier_init e2e "${E2E_STATE_DIR:-/var/cache/kind-entrypoint-e2e}"

shim=/usr/local/libexec/kind-entrypoint-e2e/runtimeshim
shim_runtime=kind-e2e-runc
base_repo=kind-entrypoint-e2e/base
pkg_image=kind-entrypoint:e2e
node_image=kind-entrypoint-e2e/node:dev
export DOCKER_BUILDKIT=0 # the classic builder needs no buildx plugin

# One run at a time: two runs would fight over dockerd and image tags. A
# tier that builds on this one (test/cluster/run.sh) holds the lock for its
# whole run and says so with E2E_LOCK_HELD=1.
[[ ${E2E_LOCK_HELD:-} == 1 ]] || tier_lock "$state/lock"

# --- 1. packages -------------------------------------------------------------
# An engine that DOCKER_HOST names belongs to the caller (test/docker29
# builds the images in its own engine): it is neither installed, nor
# configured, nor started here.
own_engine=1
[[ -z ${DOCKER_HOST:-} ]] || own_engine=0
missing=()
((!own_engine)) || command -v dockerd > /dev/null || missing+=(docker.io)
command -v debootstrap > /dev/null || missing+=(debootstrap)
command -v iptables > /dev/null || missing+=(iptables)
[[ -e /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
apt_install "$log_dir/apt.log" "${missing[@]}"
# Docker's own client wins if an older one is first on PATH: both are fine,
# the daemon's API (1.41) is what the tests use.

# --- 2. the --privileged runtime shim ----------------------------------------
need_shim=0
if ((own_engine)) && capabilities_short; then
  need_shim=1
  log "capability bounding set is short (missing mask $cap_missing_mask): using the runtime shim"
  build_runtime_shim "$shim"
  daemon_json=/etc/docker/daemon.json
  want_json="{
  \"runtimes\": { \"$shim_runtime\": { \"path\": \"$shim\" } },
  \"default-runtime\": \"$shim_runtime\"
}"
  mkdir -p /etc/docker
  if [[ ! -s $daemon_json ]]; then
    printf '%s\n' "$want_json" > "$daemon_json"
  elif ! grep -q "\"$shim_runtime\"" "$daemon_json"; then
    die "$daemon_json exists without the runtime shim; merge this into it and rerun:
$want_json"
  fi
fi

# --- 3. dockerd --------------------------------------------------------------
default_runtime() { docker info --format '{{.DefaultRuntime}}' 2> /dev/null; }
if ((own_engine)) && ! docker info > /dev/null 2>&1; then
  t=$(date +%s)
  log "starting dockerd (log: $log_dir/dockerd.log)"
  start_daemon "$log_dir/dockerd.log" setsid dockerd
  for _ in $(seq 120); do
    docker info > /dev/null 2>&1 && break
    sleep 0.5
  done
  docker info > /dev/null 2>&1 || { tail -n 30 "$log_dir/dockerd.log" >&2; die "dockerd did not answer within 60s"; }
  log "dockerd up in $(since "$t")"
fi
if ((need_shim)) && [[ $(default_runtime) != "$shim_runtime" ]]; then
  # A daemon that was already running: runtimes and default-runtime are
  # reloaded on SIGHUP.
  pid=$(cat /var/run/docker.pid 2> /dev/null) || die "dockerd runs without the shim and /var/run/docker.pid is missing"
  log "reloading dockerd $pid for the runtime shim"
  kill -HUP "$pid"
  for _ in $(seq 20); do
    [[ $(default_runtime) == "$shim_runtime" ]] && break
    sleep 0.5
  done
  [[ $(default_runtime) == "$shim_runtime" ]] || die "dockerd did not take the runtime shim as default runtime"
fi

# Leftovers of an interrupted run: our containers carry a label, kind's
# clusters and our networks a name prefix.
mapfile -t stale < <(
  docker ps -aq --filter label=kind-entrypoint-e2e
  docker ps -a --format '{{.ID}} {{.Label "io.x-k8s.kind.cluster"}}' | awk '$2 ~ /^kind-ep-e2e/ {print $1}'
)
if ((${#stale[@]})); then
  log "removing ${#stale[@]} leftover containers"
  docker rm -f -v "${stale[@]}" > /dev/null
fi
mapfile -t stale_nets < <(docker network ls --format '{{.Name}}' | grep '^kind-ep-e2e' || true)
if ((${#stale_nets[@]})); then
  log "removing leftover networks: ${stale_nets[*]}"
  docker network rm "${stale_nets[@]}" > /dev/null
fi

# --- 4. base image -----------------------------------------------------------
base_hash=$(cat test/e2e/base/packages test/e2e/base/build.sh test/debootstrap.sh | sha256sum | cut -c1-12)
base_image="$base_repo:bookworm-$base_hash"
t=$(date +%s)
if docker image inspect "$base_image" > /dev/null 2>&1; then
  log "base image $base_image present"
else
  log "building base image $base_image"
  bash test/e2e/base/build.sh "$base_image" test/e2e/base/packages "$state"
fi
log "base image ready in $(since "$t")"

# --- 5. packaging and node images --------------------------------------------
t=$(date +%s)
if [[ ! -x bin/entrypoint ]]; then
  log "bin/entrypoint missing: building it (make build does this)"
  CGO_ENABLED=0 go build -trimpath -o bin/entrypoint ./cmd/entrypoint
fi
docker build -q -t "$pkg_image" . > /dev/null 2> "$log_dir/build-pkg.log" \
  || { cat "$log_dir/build-pkg.log" >&2; die "packaging image build failed"; }
docker build -q -t "$node_image" --label kind-entrypoint.base="$base_image" \
  --build-arg BASE_IMAGE="$base_image" --build-arg ENTRYPOINT_IMAGE="$pkg_image" \
  test/e2e/node > /dev/null 2> "$log_dir/build-node.log" \
  || { cat "$log_dir/build-node.log" >&2; die "node image build failed"; }
# Node images of earlier runs, untagged by this one (every node image
# carries the label; images in use by a container are kept).
docker image prune -f --filter label=kind-entrypoint.base > /dev/null
log "packaging and node images built in $(since "$t")"
if ((build_only)); then
  printf '%s\n' "$node_image"
  exit 0
fi

# --- 6. tests ----------------------------------------------------------------
E2E_KIND_CLI=$(bash test/kind-cli.sh v0.23.0) || die "building the kind CLI (test/kind-cli.sh) failed"
export E2E_KIND_CLI E2E_NODE_IMAGE=$node_image E2E_BASE_IMAGE=$base_image E2E_TIER_START=$tier_start
export E2E_CACHE_DIR=$state
t=$(date +%s)
rc=0
# shellcheck disable=SC2086 # E2E_GO_TEST_ARGS is a list of arguments
go test -tags e2e -v -count=1 -parallel 4 -timeout 20m ${E2E_GO_TEST_ARGS:-} ./test/e2e/ || rc=$?
log "go test finished in $(since "$t") (exit $rc); whole tier $(since "$tier_start")"
exit "$rc"
