#!/usr/bin/env bash
# Cluster tier: real Kubernetes on nodes booted by the entrypoint (what
# `make e2e-cluster` runs). As root, on the machine test/e2e/run.sh runs on:
#   1. the e2e node image and Docker, from test/e2e/run.sh --build-only;
#   2. Kubernetes, etcd and CoreDNS built from the Go module proxy
#      (build-binaries.sh), cached by a hash of their recipe;
#   3. the images kubeadm and the default manifests name, made locally
#      (FROM scratch, or the e2e base image where a userland is needed) and
#      saved into one archive;
#   4. the cluster node image (node/Dockerfile) and the control runs' images
#      with kind's own scripts (node/Dockerfile.reference), of the kind
#      release made for this Kubernetes and of kind v0.23.0;
#   5. go test -tags cluster ./test/cluster/: the real kind CLI creates,
#      checks and restarts clusters from both images.
#
# `run.sh --build-only` stops after step 4 and prints the three image names.
# `run.sh --matrix` (make e2e-cluster-matrix) runs the shape matrix instead
# of step 5's tests: IPv4 1+2, IPv6, dual-stack, HA and podman clusters from
# the same images (matrix_test.go); it also builds kind's load balancer image
# and loads the node images into podman.
# With CLUSTER_DOCKER_HOST set (the Docker 29 tier, test/docker29/run.sh
# --cluster), the images are still built in the machine's Docker, then
# loaded into the engine at that address (those it lacks), and the tests'
# clusters are made there; the podman shape is not run.
# Environment: CLUSTER_VERSIONS (the versions file, default
# test/cluster/versions; versions-stack: the same tier on kind v0.33.0's
# node stack, test/stack), CLUSTER_GO_TEST_ARGS (extra `go test` arguments),
# CLUSTER_STATE_DIR (default /var/cache/kind-entrypoint-cluster),
# CLUSTER_LOCK_WAIT (seconds to wait for the e2e lock, default 1800).
set -o errexit -o nounset -o pipefail

build_only=0 matrix=0
case ${1:-} in
  "") ;;
  --build-only) build_only=1 ;;
  --matrix) matrix=1 ;;
  *) echo "usage: $0 [--build-only | --matrix]" >&2; exit 2 ;;
esac

# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
tier_init cluster "${CLUSTER_STATE_DIR:-/var/cache/kind-entrypoint-cluster}"
here=test/cluster
[[ -z ${CLUSTER_DOCKER_HOST:-} ]] || ((matrix)) || die "CLUSTER_DOCKER_HOST is read by --matrix only"
e2e_state=${E2E_STATE_DIR:-/var/cache/kind-entrypoint-e2e}
label=kind-entrypoint-cluster # on every image this tier makes
export DOCKER_BUILDKIT=0

mkdir -p "$e2e_state"

# The e2e tier's lock, for this whole run: both tiers tag images and drive
# the same dockerd. A caller that holds it already (test/conformance/run.sh, the matrix)
# says so with E2E_LOCK_HELD=1.
[[ ${E2E_LOCK_HELD:-} == 1 ]] || tier_lock "$e2e_state/lock" "${CLUSTER_LOCK_WAIT:-1800}"
export E2E_LOCK_HELD=1

versions=${CLUSTER_VERSIONS:-$here/versions}
# shellcheck source=versions
source "$versions"

# --- 1. Docker and the e2e node image ----------------------------------------
# NODE_STACK: the node image's stack, bookworm (test/e2e/node) or kind
# v0.33.0's trixie (test/stack: the same recipe on its base).
case ${NODE_STACK:-bookworm} in
  bookworm) node_image=$(bash test/e2e/run.sh --build-only) ;;
  trixie) node_image=$(bash test/stack/run.sh --build-only) ;;
  *) die "$versions: NODE_STACK=$NODE_STACK, want bookworm or trixie" ;;
esac
# the base image it was built from (run.sh labels the node image with it)
base_image=$(docker image inspect -f '{{index .Config.Labels "kind-entrypoint.base"}}' "$node_image")
docker image inspect "$base_image" > /dev/null || die "base image $base_image missing"

# Leftovers of an interrupted run: kind's nodes and our throwaway containers
# carry the cluster's name, which starts kind-ep-cl- (the matrix's:
# kind-ep-mx-), and so do the networks.
prefix=kind-ep-cl-
((matrix)) && prefix=kind-ep-mx-
remove_leftovers() { # ENGINE
  local stale stale_nets
  mapfile -t stale < <("$1" ps -a --format '{{.ID}} {{.Names}}' | awk -v p="$prefix" 'index($2, p) == 1 {print $1}')
  if ((${#stale[@]})); then
    log "removing ${#stale[@]} leftover $1 containers"
    "$1" rm -f -v "${stale[@]}" > /dev/null
  fi
  mapfile -t stale_nets < <("$1" network ls --format '{{.Name}}' | grep "^$prefix" || true)
  if ((${#stale_nets[@]})); then
    log "removing leftover $1 networks: ${stale_nets[*]}"
    "$1" network rm "${stale_nets[@]}" > /dev/null
  fi
}
remove_leftovers docker

# --- 2. Kubernetes, etcd, CoreDNS --------------------------------------------
bin_hash=$(cat "$versions" "$here/build-binaries.sh" "$here/k8s-module.sh" test/lib.sh | sha256sum | cut -c1-12)
bins=$state/bin-$bin_hash
t=$(date +%s)
if [[ -x $bins/kubeadm && -x $bins/etcd && -x $bins/coredns ]]; then
  log "binaries $bins present"
else
  log "building Kubernetes $KUBERNETES, etcd $ETCD, CoreDNS $COREDNS (cold: about 20 minutes on 2 cores; log: $log_dir/build-binaries.log)"
  bash "$here/build-binaries.sh" "$versions" "$bins" > "$log_dir/build-binaries.log" 2>&1 \
    || { grep -v '^go: downloading' "$log_dir/build-binaries.log" | tail -n 30 >&2; die "building the binaries failed"; }
fi
log "binaries ready in $(since "$t")"

# --- 3. component images -----------------------------------------------------
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t=$(date +%s)
mkdir -p "$work/ctx/bin" "$work/tools"
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/tools/" ./test/cluster/pause ./test/cluster/podprobe
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/ctx/bin/runtimeshim" ./test/e2e/runtimeshim

# import_image NAME ENTRYPOINT_JSON FILE...: a FROM-scratch image holding FILEs
# in /usr/local/bin (and at / too, for those images whose entrypoint is /NAME).
import_image() {
  local name=$1 entry=$2
  shift 2
  local root=$work/root-${name//[^a-z0-9]/_}
  mkdir -p "$root/usr/local/bin"
  for f in "$@"; do
    cp "$f" "$root/usr/local/bin/"
    ln -f "$root/usr/local/bin/$(basename "$f")" "$root/$(basename "$f")"
  done
  local change=(--change 'ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change "LABEL $label=1")
  [[ -n $entry ]] && change+=(--change "ENTRYPOINT $entry")
  tar --numeric-owner --owner=0 --group=0 -C "$root" -c . | docker import "${change[@]}" - "$name" > /dev/null
}
k8s_tag=$KUBERNETES
images=(
  "registry.k8s.io/kube-apiserver:$k8s_tag"
  "registry.k8s.io/kube-controller-manager:$k8s_tag"
  "registry.k8s.io/kube-scheduler:$k8s_tag"
  "registry.k8s.io/kube-proxy:$k8s_tag"
  "registry.k8s.io/etcd:$ETCD_IMAGE_TAG"
  "registry.k8s.io/coredns/coredns:$COREDNS"
  "registry.k8s.io/pause:$PAUSE_IMAGE_TAG"
  "kind-entrypoint.test/netbase:dev"
  "kind-entrypoint.test/podprobe:dev"
)
# The archive is cached by what goes into it: docker import stamps each image
# with the time, so a new archive would be new bytes every run, and with it
# the node image's biggest layer (which the VM tier must then load again).
images_key=$({
  echo "$bin_hash ${images[*]}"
  docker image inspect -f '{{.Id}}' "$base_image"
  cat "$work/tools/pause" "$work/tools/podprobe" "$here/node/Dockerfile.netbase" "$here/run.sh"
} | sha256sum | cut -c1-12)
images_tar=$state/images-$images_key.tar
if [[ -s $images_tar ]]; then
  log "component images $images_tar present"
else
  import_image "${images[0]}" "" "$bins/kube-apiserver"
  import_image "${images[1]}" "" "$bins/kube-controller-manager"
  import_image "${images[2]}" "" "$bins/kube-scheduler"
  import_image "${images[4]}" "" "$bins/etcd"
  import_image "${images[5]}" '["/coredns"]' "$bins/coredns"
  import_image "${images[6]}" '["/pause"]' "$work/tools/pause"
  import_image "${images[8]}" '["/podprobe"]' "$work/tools/podprobe"
  mkdir "$work/netbase"
  cp "$bins/kube-proxy" "$bins/kubectl" "$here/node/Dockerfile.netbase" "$work/netbase/"
  docker build -q -f "$work/netbase/Dockerfile.netbase" --label "$label=1" --build-arg BASE_IMAGE="$base_image" \
    -t "${images[7]}" -t "${images[3]}" "$work/netbase" > /dev/null 2> "$log_dir/build-netbase.log" \
    || { cat "$log_dir/build-netbase.log" >&2; die "netbase image build failed"; }
  docker save -o "$images_tar.tmp" "${images[@]}"
  chmod 0644 "$images_tar.tmp" # node/Dockerfile does not chmod it (a layer copy)
  mv "$images_tar.tmp" "$images_tar"
  find "$state" -maxdepth 1 -name 'images-*.tar' ! -path "$images_tar" -delete
fi
ln "$images_tar" "$work/ctx/images.tar" 2> /dev/null || cp "$images_tar" "$work/ctx/images.tar"
log "component images ready in $(since "$t") ($(du -m "$images_tar" | cut -f1) MiB)"

# --- 4. node images ----------------------------------------------------------
t=$(date +%s)
# The trixie stack's images carry its name: the same Kubernetes may be
# built on both stacks.
stack=
[[ ${NODE_STACK:-bookworm} == bookworm ]] || stack=-$NODE_STACK
cluster_image=kind-entrypoint-cluster/node$stack:$KUBERNETES
reference_image=kind-entrypoint-cluster/node$stack-reference-$KIND:$KUBERNETES
# kind v0.23.0's script, where the versions file names it (KIND_REFERENCE)
reference_old_image=
[[ -z $KIND_REFERENCE ]] || reference_old_image=kind-entrypoint-cluster/node$stack-reference-$KIND_REFERENCE:$KUBERNETES
cp -r "$here/node/files" "$here/node/Dockerfile" "$work/ctx/"
cp "$bins/kubeadm" "$bins/kubelet" "$bins/kubectl" "$work/ctx/bin/"
docker build -q -t "$cluster_image" --label "$label=1" --build-arg NODE_IMAGE="$node_image" \
  --build-arg KUBERNETES_VERSION="$KUBERNETES" --build-arg PAUSE_IMAGE_TAG="$PAUSE_IMAGE_TAG" \
  "$work/ctx" > /dev/null 2> "$log_dir/build-node.log" \
  || { cat "$log_dir/build-node.log" >&2; die "cluster node image build failed"; }
# build_reference KIND_VERSION TAG: the cluster image with that kind
# release's scripts, from its Go module, in place of our binary.
build_reference() {
  local kind_dir ctx=$work/ref-$1
  kind_dir=$(module_dir "sigs.k8s.io/kind@$1") || die "go mod download sigs.k8s.io/kind@$1 failed"
  mkdir -p "$ctx/kind-bin"
  cp "$kind_dir/images/base/files/usr/local/bin/entrypoint" "$ctx/entrypoint"
  cp "$kind_dir/images/base/files/kind/bin/"*.sh "$ctx/kind-bin/"
  cp "$here/node/Dockerfile.reference" "$ctx/Dockerfile"
  cp "$here/node/reference/13-test-machine-cgroups.conf" "$ctx/"
  docker build -q -t "$2" --label "$label=1" --build-arg CLUSTER_IMAGE="$cluster_image" \
    "$ctx" > /dev/null 2> "$log_dir/build-reference.log" \
    || { cat "$log_dir/build-reference.log" >&2; die "reference node image build ($1) failed"; }
}
build_reference "$KIND" "$reference_image"
[[ -z $reference_old_image ]] || build_reference "$KIND_REFERENCE" "$reference_old_image"
log "node images $cluster_image, $reference_image${reference_old_image:+ and $reference_old_image} built in $(since "$t")"
# What earlier runs built and this one re-tagged (2 GB a run otherwise).
docker image prune -f --filter "label=$label" > /dev/null
if ((build_only)); then
  printf '%s\n' "$cluster_image" "$reference_image" ${reference_old_image:+"$reference_old_image"}
  exit 0
fi

# --- 5. tests ----------------------------------------------------------------
export CLUSTER_IMAGE=$cluster_image CLUSTER_REFERENCE_IMAGE=$reference_image CLUSTER_REFERENCE_OLD_IMAGE=$reference_old_image
CLUSTER_KIND=$(bash test/kind-cli.sh "$KIND") || die "building kind $KIND (test/kind-cli.sh) failed"
export CLUSTER_KIND
# The tests of kind v0.23.0's script and CLI, where the versions file has
# that row (KIND_REFERENCE).
skip=()
if [[ -n $KIND_REFERENCE ]]; then
  CLUSTER_KIND_OLD=$(bash test/kind-cli.sh "$KIND_REFERENCE") || die "building kind $KIND_REFERENCE (test/kind-cli.sh) failed"
  export CLUSTER_KIND_OLD
else
  skip=(-skip '^(TestReferenceScriptV023|TestOlderKind)$')
  log "$versions has no KIND_REFERENCE: TestReferenceScriptV023 and TestOlderKind are not run"
fi
export CLUSTER_LOG_DIR=$log_dir
tags=cluster timeout=60m
# lb_image_of RELEASE: the load balancer image that kind RELEASE's CLI runs
# for a cluster with more than one control plane.
lb_image_of() {
  local dir
  dir=$(module_dir "sigs.k8s.io/kind@$1") || die "go mod download sigs.k8s.io/kind@$1 failed"
  sed -n 's/^const Image = "\(.*\)"$/\1/p' "$dir/pkg/cluster/internal/loadbalancer/const.go"
}
if ((matrix)); then
  tags="cluster matrix" timeout=180m
  t=$(date +%s)
  # kind's load balancer for the HA shape, under the exact name the kind
  # release asks for (it would pull it otherwise): Debian's haproxy.
  # kind v0.33 moved to envoy (a C++ build, and no registry here): then
  # the ha shape's clusters come from KIND_HA's CLI (the versions file: an
  # earlier release with haproxy), or, without one, the ha shape does not
  # run and the table's row says why (CLUSTER_MATRIX_NO_HA).
  lb_kind=$KIND lb_image=$(lb_image_of "$KIND")
  if [[ $lb_image != */haproxy:* && -n ${KIND_HA:-} ]]; then
    log "kind $KIND's load balancer image is $lb_image, which this tier cannot build: the ha shape's clusters come from kind $KIND_HA's CLI (KIND_HA in $versions)"
    lb_kind=$KIND_HA lb_image=$(lb_image_of "$KIND_HA")
    CLUSTER_KIND_HA=$(bash test/kind-cli.sh "$KIND_HA") || die "building kind $KIND_HA (test/kind-cli.sh) failed"
    export CLUSTER_KIND_HA
  fi
  lb_built=
  if [[ $lb_image == */haproxy:* ]]; then
    docker build -q -t "$lb_image" --label "$label=1" --build-arg BASE_IMAGE="$base_image" "$here/node/haproxy" \
      > /dev/null 2> "$log_dir/build-haproxy.log" || { cat "$log_dir/build-haproxy.log" >&2; die "haproxy image build failed"; }
    lb_built=$lb_image
    log "load balancer image $lb_image (kind $lb_kind) built in $(since "$t")"
  else
    export CLUSTER_MATRIX_NO_HA="kind $lb_kind's load balancer image is $lb_image, not haproxy, which is all this tier builds (set KIND_HA in $versions)"
    log "WARN: the ha shape will not run: $CLUSTER_MATRIX_NO_HA"
  fi
  if [[ -n ${CLUSTER_DOCKER_HOST:-} ]]; then
    # Another engine (the Docker 29 tier's): the node images and the load
    # balancer's, from the machine's Docker, where that engine lacks them
    # (its data-root keeps them between runs).
    t=$(date +%s)
    # Images are compared by their layers and creation time: an engine
    # with the containerd image store (Docker 29's default) gives the
    # same image another ID.
    same='{{.Created}} {{json .RootFS.Layers}}'
    for img in "$cluster_image" "$reference_image" ${lb_built:+"$lb_built"}; do
      id=$(docker image inspect -f "$same" "$img")
      if [[ $(DOCKER_HOST=$CLUSTER_DOCKER_HOST docker image inspect -f "$same" "$img" 2> /dev/null) != "$id" ]]; then
        docker save "$img" | DOCKER_HOST=$CLUSTER_DOCKER_HOST docker load -q > "$log_dir/engine-load.log" 2>&1 \
          || { cat "$log_dir/engine-load.log" >&2; die "loading $img into $CLUSTER_DOCKER_HOST failed"; }
      fi
    done
    export DOCKER_HOST=$CLUSTER_DOCKER_HOST
    log "node images in $CLUSTER_DOCKER_HOST ($(docker version --format '{{.Server.Version}}')) in $(since "$t")"
    remove_leftovers docker
  fi
  # The podman shape: both node images in podman's store (rootful podman,
  # set up by test/podman/run.sh: make e2e-podman), loaded when it lacks them.
  if [[ -n ${CLUSTER_DOCKER_HOST:-} ]]; then
    log "the podman shape is not run against $CLUSTER_DOCKER_HOST"
  elif command -v podman > /dev/null; then
    t=$(date +%s)
    remove_leftovers podman
    for img in "$cluster_image" "$reference_image"; do
      id=$(docker image inspect -f '{{.Id}}' "$img")
      if [[ $(podman image inspect -f '{{.Id}}' "localhost/$img" 2> /dev/null) != "${id#sha256:}" ]]; then
        docker save "$img" | podman load -q > "$log_dir/podman-load.log" 2>&1 \
          || { cat "$log_dir/podman-load.log" >&2; die "podman load of $img failed"; }
      fi
    done
    export CLUSTER_PODMAN_IMAGE=localhost/$cluster_image CLUSTER_PODMAN_REFERENCE_IMAGE=localhost/$reference_image
    log "node images in podman in $(since "$t")"
    # Nodes of one podman network reach each other whatever their
    # addresses, as on a Docker network: a pod on one node reaches a pod
    # (CoreDNS) on another with pod addresses. Docker sets FORWARD's policy
    # to DROP on this machine, br_netfilter sends even traffic between two
    # ports of one bridge through FORWARD, and podman's netavark accepts
    # only its network's own addresses there: without this rule a pod on
    # the worker never reached CoreDNS on the control plane. Only bridged
    # traffic within one of podman's bridges, for this run only.
    podman_fw=(-i 'podman+' -o 'podman+' -m physdev --physdev-is-bridged
      -m comment --comment "kind-entrypoint-cluster: nodes of one podman network reach each other" -j ACCEPT)
    iptables -w -C FORWARD "${podman_fw[@]}" 2> /dev/null || iptables -w -I FORWARD "${podman_fw[@]}" \
      || die "adding the podman FORWARD rule failed"
    trap 'while iptables -w -D FORWARD "${podman_fw[@]}" 2> /dev/null; do :; done; rm -rf "$work"' EXIT
  else
    log "WARN: no podman: the podman shape will fail (make e2e-podman installs it)"
  fi
fi
t=$(date +%s)
rc=0
if ((matrix)); then
  # shellcheck disable=SC2086 # CLUSTER_GO_TEST_ARGS is a list of arguments
  go test -tags "$tags" -v -count=1 -timeout "$timeout" -run '^(TestMatrix|TestIPv6Corefile|TestContainsAddr|TestHA.*)$' ${CLUSTER_GO_TEST_ARGS:-} ./test/cluster/ || rc=$?
  [[ -z ${CLUSTER_DOCKER_HOST:-} ]] && command -v podman > /dev/null && remove_leftovers podman
else
  # shellcheck disable=SC2086 # CLUSTER_GO_TEST_ARGS is a list of arguments
  go test -tags "$tags" -v -count=1 -timeout "$timeout" "${skip[@]}" ${CLUSTER_GO_TEST_ARGS:-} ./test/cluster/ || rc=$?
fi
remove_leftovers docker
log "go test finished in $(since "$t") (exit $rc); whole tier $(since "$tier_start")"
exit "$rc"
