#!/usr/bin/env bash
# Podman tier: kind's podman provider (KIND_EXPERIMENTAL_PROVIDER=podman)
# with rootful podman on this host (what `make e2e-podman` runs). See
# test/podman/README.md.
#
# Works from a fresh Debian 12 machine as root, with no stdin and no image
# registry, and is idempotent:
#   1. installs Debian's podman (bookworm: 4.3) with netavark and
#      aardvark-dns, Debian's default network stack for it;
#   2. where the capability bounding set is short, installs the OCI runtime
#      wrapper (test/e2e/runtimeshim: drops the capabilities and lowers the
#      rlimits this host cannot grant) as podman's default runtime in
#      /etc/containers/containers.conf;
#   3. builds the node image with the e2e recipe (test/e2e/run.sh
#      --build-only, one image for every tier; it installs and starts
#      Docker too) and moves it into podman (docker save | podman load),
#      unless podman holds that image id;
#   4. builds the kind CLI (test/kind-cli.sh);
#   5. removes what an interrupted run left (containers, pods, volumes,
#      networks named kind-ep-podman-*), runs go test -tags podman
#      ./test/podman/, and removes leftovers again on the way out.
#
# Environment: PODMAN_GO_TEST_ARGS (extra `go test` arguments),
# PODMAN_STATE_DIR (default /var/cache/kind-entrypoint-podman).
set -o errexit -o nounset -o pipefail

# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
tier_init podman "${PODMAN_STATE_DIR:-/var/cache/kind-entrypoint-podman}"

# The tier's own copy of the wrapper: the e2e tier rebuilds its copy under
# its own lock, and neither may swap the other's binary mid-run.
shim=/usr/local/libexec/kind-entrypoint-podman/runtimeshim
shim_runtime=kind-podman-runc
containers_conf=/etc/containers/containers.conf
image_repo=localhost/kind-entrypoint-podman/node
prefix=kind-ep-podman-

tier_lock "$state/lock"

# --- 1. packages -------------------------------------------------------------
missing=()
command -v podman > /dev/null || missing+=(podman)
[[ -x /usr/lib/podman/netavark ]] || missing+=(netavark)
[[ -x /usr/lib/podman/aardvark-dns ]] || missing+=(aardvark-dns)
apt_install "$log_dir/apt.log" "${missing[@]}"
podman_version=$(podman version --format '{{.Client.Version}}') || die "podman does not answer"

# --- 2. the runtime wrapper --------------------------------------------------
want_runtime=
if capabilities_short; then
  want_runtime=$shim_runtime
  log "capability bounding set is short (missing mask $cap_missing_mask): podman runs nodes through the runtime wrapper"
  build_runtime_shim "$shim"
  want_conf="[engine]
runtime = \"$shim_runtime\"

[engine.runtimes]
$shim_runtime = [\"$shim\"]"
  mkdir -p "$(dirname "$containers_conf")"
  if [[ ! -s $containers_conf ]]; then
    printf '# Written by test/podman/run.sh: this host cannot grant what podman asks\n# runc for (see test/e2e/runtimeshim).\n%s\n' "$want_conf" > "$containers_conf"
  elif ! grep -q "^$shim_runtime = \[\"$shim\"\]" "$containers_conf"; then
    die "$containers_conf exists without the runtime wrapper; merge this into it and rerun:
$want_conf"
  fi
fi
runtime=$(podman info --format '{{.Host.OCIRuntime.Name}}') || die "podman info failed"
if [[ -n $want_runtime && $runtime != "$want_runtime" ]]; then
  die "podman's runtime is $runtime, not $want_runtime from $containers_conf"
fi
log "podman $podman_version, runtime $runtime, network backend $(podman info --format '{{.Host.NetworkBackend}}'), cgroup $(podman info --format '{{.Host.CgroupsVersion}}')"

# --- 3. the node image -------------------------------------------------------
t=$(date +%s)
# 9>&-: the e2e run must not inherit our lock
docker_image=$(bash test/e2e/run.sh --build-only 9>&-) || die "building the node image (test/e2e/run.sh --build-only) failed"
image_id=$(docker image inspect -f '{{.Id}}' "$docker_image") || die "no image $docker_image"
image_id=${image_id#sha256:}
# The e2e tag is shared by every checkout on this machine: make sure the
# image holds this checkout's binary, not one another run tagged since.
probe=$(docker create "$image_id" /bin/true)
image_bin_sum=$(docker cp "$probe:/usr/local/bin/entrypoint" - | tar -xO | sha256sum | cut -d' ' -f1)
docker rm "$probe" > /dev/null
[[ $image_bin_sum == $(sha256sum < bin/entrypoint | cut -d' ' -f1) ]] \
  || die "$docker_image ($image_id) holds another entrypoint than bin/entrypoint: another checkout rebuilt the tag; rerun"
node_image=$image_repo:${image_id:0:12}
if [[ $(podman image inspect -f '{{.Id}}' "$image_id" 2> /dev/null) != "$image_id" ]]; then
  docker save "$docker_image" | podman load -q > "$log_dir/load.log" 2>&1 \
    || { cat "$log_dir/load.log" >&2; die "podman load failed"; }
  loaded=$(podman image inspect -f '{{.Id}}' "$image_id" 2> /dev/null) || true
  [[ $loaded == "$image_id" ]] || die "podman load did not give image $image_id"
fi
podman tag "$image_id" "$node_image"
# Older node images of this tier, and the name docker save gave the load.
podman untag "$image_id" "localhost/$docker_image" 2> /dev/null || true
mapfile -t old < <(podman images --format '{{.ID}} {{.Repository}}' | awk -v r="$image_repo" -v id="${image_id:0:12}" '$2 == r && $1 != id {print $1}' | sort -u)
((${#old[@]} == 0)) || podman rmi -f "${old[@]}" > /dev/null 2>&1 || log "could not remove old images ${old[*]}"
log "node image $node_image ready in $(since "$t")"

# --- 4. the kind CLI ---------------------------------------------------------
t=$(date +%s)
kind_cli=$(bash test/kind-cli.sh) || die "building the kind CLI failed"
log "kind CLI $kind_cli ready in $(since "$t")"

# --- 5. tests ----------------------------------------------------------------
# Everything the tests make is named $prefix*: kind's nodes (cluster names),
# the nodes the tests run themselves, their networks and kind's anonymous
# /var volumes (labelled with the node's name).
cleanup() {
  local c n v
  mapfile -t c < <(podman ps -a --format '{{.Names}}' | grep "^$prefix" || true)
  ((${#c[@]} == 0)) || { log "removing containers: ${c[*]}"; podman rm -f -v "${c[@]}" > /dev/null || true; }
  mapfile -t c < <(podman pod ps --format '{{.Name}}' | grep "^$prefix" || true)
  ((${#c[@]} == 0)) || { log "removing pods: ${c[*]}"; podman pod rm -f "${c[@]}" > /dev/null || true; }
  mapfile -t v < <(podman volume ls --format '{{.Name}} {{range $k, $v := .Labels}}{{$k}} {{end}}' | awk -v p="$prefix" '{for (i = 2; i <= NF; i++) if (index($i, p) == 1) print $1}' | sort -u)
  ((${#v[@]} == 0)) || { log "removing volumes: ${v[*]}"; podman volume rm -f "${v[@]}" > /dev/null || true; }
  mapfile -t n < <(podman network ls --format '{{.Name}}' | grep "^$prefix" || true)
  ((${#n[@]} == 0)) || { log "removing networks: ${n[*]}"; podman network rm -f "${n[@]}" > /dev/null || true; }
}
cleanup
trap cleanup EXIT

export PODMAN_NODE_IMAGE=$node_image PODMAN_KIND=$kind_cli PODMAN_NAME_PREFIX=$prefix
export PODMAN_TIER_START=$tier_start
t=$(date +%s)
rc=0
# shellcheck disable=SC2086 # PODMAN_GO_TEST_ARGS is a list of arguments
go test -tags podman -v -count=1 -timeout 20m ${PODMAN_GO_TEST_ARGS:-} ./test/podman/ || rc=$?
log "go test finished in $(since "$t") (exit $rc); whole tier $(since "$tier_start")"
exit "$rc"
