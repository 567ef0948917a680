#!/usr/bin/env bash
# Stack tier: the node image on kind v0.33.0's node stack (Debian trixie,
# systemd 257, containerd v2.3.4, runc v1.4.3), as `make e2e-stack` runs it.
# As root, on the machine test/e2e/run.sh runs on:
#   1. Docker and the packaging image, from test/e2e/run.sh --build-only;
#   2. the runtime (runtime.sh: build-runtime.sh at the versions in
#      `versions`), built from the Go module proxy, cached by a hash of its
#      recipe;
#   3. the trixie rootfs (debootstrap, test/e2e/base/build.sh with SUITE
#      trixie and ./packages), then base/Dockerfile puts the runtime in it;
#   4. the node image: test/e2e/node's recipe on that base, so the node is
#      laid out as the bookworm one, with our binary;
#   5. go test -tags e2e ./test/e2e/ against that image: every e2e test,
#      with kind v0.33.0's CLI and its script as the differential's control.
#
# `run.sh --build-only` stops after step 4 and prints the node image's name
# (the cluster tier builds its trixie rows on it).
# Environment: STACK_GO_TEST_ARGS (extra `go test` arguments),
# STACK_STATE_DIR (default /var/cache/kind-entrypoint-stack).
set -o errexit -o nounset -o pipefail

build_only=0
case ${1:-} in
  "") ;;
  --build-only) build_only=1 ;;
  *) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac

# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
tier_init stack "${STACK_STATE_DIR:-/var/cache/kind-entrypoint-stack}"
here=test/stack
e2e_state=${E2E_STATE_DIR:-/var/cache/kind-entrypoint-e2e}
export DOCKER_BUILDKIT=0
mkdir -p "$e2e_state"
# The e2e tier's lock: the same dockerd, the same packaging image.
[[ ${E2E_LOCK_HELD:-} == 1 ]] || tier_lock "$e2e_state/lock"
export E2E_LOCK_HELD=1
# shellcheck source=test/stack/versions
source "$here/versions"

# --- 1. Docker and the packaging image ---------------------------------------
bash test/e2e/run.sh --build-only > /dev/null
pkg_image=kind-entrypoint:e2e

# --- 2. the runtime ----------------------------------------------------------
rt=$(bash "$here/runtime.sh") || die "building the runtime (runtime.sh) failed"
rt_hash=${rt##*/runtime-}

# --- 3. the trixie base ------------------------------------------------------
t=$(date +%s)
rootfs_hash=$(cat "$here/packages" test/e2e/base/build.sh test/debootstrap.sh | sha256sum | cut -c1-12)
rootfs_image=kind-entrypoint-stack/rootfs:$DEBIAN_SUITE-$rootfs_hash
if ! docker image inspect "$rootfs_image" > /dev/null 2>&1; then
  log "building $rootfs_image"
  bash test/e2e/base/build.sh "$rootfs_image" "$here/packages" "$state" "$DEBIAN_SUITE"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cp -r "$rt/." "$work/bin/"
base_image=kind-entrypoint-stack/base:$DEBIAN_SUITE-$rt_hash-$rootfs_hash
docker build -q -t "$base_image" --build-arg ROOTFS_IMAGE="$rootfs_image" -f "$here/base/Dockerfile" "$work" \
  > /dev/null 2> "$log_dir/build-base.log" || { cat "$log_dir/build-base.log" >&2; die "base image build failed"; }
log "base image $base_image ready in $(since "$t")"

# --- 4. the node image -------------------------------------------------------
t=$(date +%s)
node_image=kind-entrypoint-stack/node:$KIND
docker build -q -t "$node_image" --label kind-entrypoint.base="$base_image" \
  --build-arg BASE_IMAGE="$base_image" --build-arg ENTRYPOINT_IMAGE="$pkg_image" \
  test/e2e/node > /dev/null 2> "$log_dir/build-node.log" \
  || { cat "$log_dir/build-node.log" >&2; die "node image build failed"; }
docker image prune -f --filter label=kind-entrypoint.base > /dev/null
log "node image $node_image built in $(since "$t")"
if ((build_only)); then
  printf '%s\n' "$node_image"
  exit 0
fi

# --- 5. tests ----------------------------------------------------------------
E2E_KIND_CLI=$(bash test/kind-cli.sh "$KIND") || die "building kind $KIND (test/kind-cli.sh) failed"
export E2E_KIND_CLI E2E_NODE_IMAGE=$node_image E2E_BASE_IMAGE=$base_image E2E_TIER_START=$tier_start
export E2E_CACHE_DIR=$e2e_state E2E_DIFF_KIND_VERSION=$KIND
t=$(date +%s)
rc=0
# shellcheck disable=SC2086 # STACK_GO_TEST_ARGS is a list of arguments
go test -tags e2e -v -count=1 -parallel 4 -timeout 20m ${STACK_GO_TEST_ARGS:-} ./test/e2e/ || rc=$?
log "go test finished in $(since "$t") (exit $rc); whole tier $(since "$tier_start")"
exit "$rc"
