#!/usr/bin/env bash
# Kubernetes' conformance suite on our nodes and on kind's script (what
# `make e2e-conformance` runs), the way kind's CI runs it
# (hack/ci/e2e-k8s.sh): 1 control plane + 2 workers, dnsSearch: [], e2e.test
# with --provider=skeleton, focus \[Conformance\], \[Serial\] skipped since
# ginkgo runs in parallel, label filter
# `Feature: isEmpty && !Slow && !Disruptive && !Flaky`. As root:
#   1. the node images of the cluster tier (test/cluster/run.sh --build-only):
#      ours, and the control with kind's script;
#   2. e2e.test, ginkgo, agnhost and nnp from the Go module proxy
#      (build-tools.sh), cached by a hash of their recipe;
#   3. the test images the selected specs use, built locally under the names
#      `e2e.test --list-images` prints (images/), saved into one archive;
#   4. for each node image: a cluster, the archive loaded into its nodes, the
#      suite, its JUnit report; the cluster is deleted;
#   5. the comparison of the reports (junitdiff/), which fails the run when
#      ours failed a spec or a spec passed on the control and not on ours.
#
# Environment:
#   CONFORMANCE_SUITE  subset (default: what the entrypoint touches, see
#                      README.md) or full (every [Conformance] spec)
#   CONFORMANCE_PROCS  ginkgo processes (default 4)
#   CONFORMANCE_RUNS   which node images, in order (default "ours control")
#   CONFORMANCE_OUT    where the reports go (default
#                      /var/log/kind-entrypoint-conformance/DATE)
set -o errexit -o nounset -o pipefail

# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
tier_init conformance "${CLUSTER_STATE_DIR:-/var/cache/kind-entrypoint-cluster}"
here=test/conformance
e2e_state=${E2E_STATE_DIR:-/var/cache/kind-entrypoint-e2e}
out=${CONFORMANCE_OUT:-/var/log/kind-entrypoint-conformance/$(date -u +%Y%m%dT%H%M%SZ)}
suite=${CONFORMANCE_SUITE:-subset}
procs=${CONFORMANCE_PROCS:-4}
read -r -a runs <<< "${CONFORMANCE_RUNS:-ours control}"
prefix="kind-ep-cf-" # every cluster, node and network this script makes
label="kind-entrypoint-conformance" # on every image it makes
net=${prefix}net
export DOCKER_BUILDKIT=0

case $suite in subset | full) ;; *) die "CONFORMANCE_SUITE must be subset or full, not $suite" ;; esac
mkdir -p "$e2e_state" "$out"

# The e2e lock for the whole run: clusters of the tiers and of other runs
# would share 2 cores and time out. A conformance run waits up to 90 minutes.
log "waiting for $e2e_state/lock"
tier_lock "$e2e_state/lock" 5400
export E2E_LOCK_HELD=1
log "lock taken after $(since "$tier_start")"

# remove_ours: every cluster node, container and network named $prefix*;
# at the start (an interrupted run's) and at the end, on success and failure.
remove_ours() {
  local ids nets
  ids=$(docker ps -a --format '{{.ID}} {{.Names}}' | awk -v p="$prefix" 'index($2, p) == 1 {print $1}')
  # shellcheck disable=SC2086 # a list of container ids
  [[ -z $ids ]] || docker rm -f -v $ids > /dev/null || true
  nets=$(docker network ls --format '{{.Name}}' | awk -v p="$prefix" 'index($1, p) == 1')
  # shellcheck disable=SC2086 # a list of network names
  [[ -z $nets ]] || docker network rm $nets > /dev/null || true
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# shellcheck source=../cluster/versions
source test/cluster/versions

# --- 1. node images ----------------------------------------------------------
t=$(date +%s)
bash test/cluster/run.sh --build-only > "$work/node-images" || die "test/cluster/run.sh --build-only failed"
mapfile -t node_images < "$work/node-images"
# Docker runs from here on (the build above starts dockerd when none answers).
remove_ours
trap 'remove_ours; rm -rf "$work"' EXIT
declare -A image_of=([ours]=${node_images[0]} [control]=${node_images[1]})
for r in "${runs[@]}"; do
  [[ -n ${image_of[$r]:-} ]] || die "CONFORMANCE_RUNS: $r is neither ours nor control"
done
base_image=$(docker image inspect -f '{{index .Config.Labels "kind-entrypoint.base"}}' "${image_of[ours]}")
kind=$(bash test/kind-cli.sh "$KIND")
# kubectl, for e2e.test and for us: the one in the node image
c=$(docker create "${image_of[ours]}")
docker cp "$c:/usr/bin/kubectl" "$work/kubectl" > /dev/null
docker rm "$c" > /dev/null
log "node images ready in $(since "$t"): ${image_of[ours]}, ${image_of[control]}"

# --- 2. e2e.test, ginkgo, agnhost, nnp ---------------------------------------
t=$(date +%s)
tools=$state/conformance-tools-$(cat test/cluster/versions test/cluster/k8s-module.sh "$here/build-tools.sh" test/lib.sh | sha256sum | cut -c1-12)
if [[ -x $tools/e2e.test && -x $tools/ginkgo ]]; then
  log "tools $tools present"
else
  log "building e2e.test, ginkgo, agnhost (cold: about 15 minutes on 2 cores; log: $out/build-tools.log)"
  bash "$here/build-tools.sh" test/cluster/versions "$tools" > "$out/build-tools.log" 2>&1 \
    || { grep -v '^go: downloading' "$out/build-tools.log" | tail -n 30 >&2; die "building the tools failed"; }
fi
log "tools ready in $(since "$t")"

# --- 3. test images ----------------------------------------------------------
t=$(date +%s)
"$tools/e2e.test" --list-images > "$work/list-images"
# image_names NAME: the exact names e2e.test uses for the test image NAME
# (of Kubernetes' e2e-test-images; other registries on the list hold images
# that must not be found, such as agnhost in a registry that needs a login).
image_names() {
  grep -E "/e2e-test-images/$1:[^/]+$" "$work/list-images" \
    || die "e2e.test --list-images names no e2e-test-images/$1 image"
}
# Each is a list of names (busybox, httpd and nginx have two tags each).
busybox=$(image_names busybox)
agnhost=$(image_names agnhost)
dnsutils=$(image_names jessie-dnsutils)
nonewprivs=$(image_names nonewprivs)
httpd=$(image_names httpd)
nginx=$(image_names nginx)
busybox_base=$(head -n 1 <<< "$busybox") # what the images on busybox build on
# shellcheck disable=SC2206 # lists of names
all_images=($busybox $agnhost $dnsutils $nonewprivs $httpd $nginx)
images_key=$({
  docker image inspect -f '{{.Id}}' "$base_image"
  printf '%s\n' "${all_images[@]}"
  cat "$tools/agnhost" "$tools/nonewprivs" "$here"/images/*
} | sha256sum | cut -c1-12)
images_tar=$state/conformance-images-$images_key.tar
if [[ -s $images_tar ]]; then
  log "test images $images_tar present"
else
  log "building the test images: ${all_images[*]}"
  ctx=$work/images
  mkdir -p "$ctx"
  cp "$here"/images/Dockerfile.* "$tools/agnhost" "$ctx/"
  cp "$tools/nonewprivs" "$ctx/nnp"
  k8s_dir=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  cp "$k8s_dir/test/images/agnhost/porter/localhost.crt" "$k8s_dir/test/images/agnhost/porter/localhost.key" "$ctx/"
  chmod 0644 "$ctx"/localhost.*
  # build_image DOCKERFILE NAME...: one image, tagged with every NAME
  build_image() {
    local file=$1 tags=()
    shift
    for n in "$@"; do tags+=(-t "$n"); done
    docker build -q -f "$ctx/$file" --label "$label=1" --build-arg BASE_IMAGE="$base_image" \
      --build-arg BUSYBOX_IMAGE="$busybox_base" "${tags[@]}" "$ctx" > /dev/null 2> "$out/build-$file.log" \
      || { cat "$out/build-$file.log" >&2; die "$file: image build failed"; }
  }
  # shellcheck disable=SC2086 # lists of image names
  {
    build_image Dockerfile.busybox $busybox
    build_image Dockerfile.agnhost $agnhost
    build_image Dockerfile.dnsutils $dnsutils
    build_image Dockerfile.nonewprivs $nonewprivs
    build_image Dockerfile.httpd $httpd
    build_image Dockerfile.nginx $nginx
  }
  docker save -o "$images_tar.tmp" "${all_images[@]}"
  mv "$images_tar.tmp" "$images_tar"
  find "$state" -maxdepth 1 -name 'conformance-images-*.tar' ! -path "$images_tar" -delete
  docker rmi "${all_images[@]}" > /dev/null
  docker image prune -f --filter "label=$label" > /dev/null
fi
log "test images ready in $(since "$t") ($(du -m "$images_tar" | cut -f1) MiB)"

# --- 4. the suite, on each node image -----------------------------------------
# Specs that cannot run on this machine, each by its exact name, with the
# reason in README.md.
offline_skips=()
focus=('\[Conformance\]')
if [[ $suite == subset ]]; then
  # What the entrypoint prepares: the kubelet, cgroups and /sys, /proc in
  # pods; DNS through the node's resolv.conf and Services through
  # iptables; mounts; the workloads that run on all of it.
  focus=(
    '\[sig-node\]'
    '\[sig-network\] DNS' '\[sig-network\] Services'
    '\[sig-storage\] EmptyDir' '\[sig-storage\] HostPath' '\[sig-storage\] Projected' '\[sig-storage\] Subpath'
    '\[sig-apps\] Deployment' '\[sig-apps\] ReplicaSet' '\[sig-apps\] ReplicationController' '\[sig-apps\] StatefulSet'
  )
fi
skip='\[Serial\]'
for s in "${offline_skips[@]}"; do
  skip+="|$(sed 's/[][\\.*+?(){}|^$]/\\&/g' <<< "$s")"
done
# kind CI's label filter; `Conformance` is the label of every [Conformance]
# spec, so that a subset's focus stays within the conformance suite.
label_filter='Conformance && Feature: isEmpty && !Slow && !Disruptive && !Flaky'
focus_args=()
for f in "${focus[@]}"; do focus_args+=("--focus=$f"); done

# node_logs CLUSTER: each node's entrypoint lines, failed units and kubelet
# journal, and kind's log export.
node_logs() {
  "$kind" export logs "$out/$1-logs" --name "$1" > /dev/null 2>&1 || true
  for n in $(docker ps -a --format '{{.Names}}' | grep "^$1-"); do
    log "--- node $n: container log"
    docker logs "$n" 2>&1 | tail -n 40 >&2 || true
    log "--- node $n: failed units"
    docker exec "$n" systemctl --failed --no-pager >&2 || true
    log "--- node $n: kubelet"
    docker exec "$n" journalctl -u kubelet --no-pager -n 40 >&2 || true
  done
}

cat > "$work/kind-config.yaml" <<'EOF'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  ipFamily: ipv4
  kubeProxyMode: iptables
  dnsSearch: []
nodes:
- role: control-plane
- role: worker
- role: worker
EOF

reports=()
for r in "${runs[@]}"; do
  cluster=$prefix$r
  export KUBECONFIG=$work/kubeconfig-$r
  t=$(date +%s)
  log "$r: creating $cluster (1 control plane + 2 workers) from ${image_of[$r]}"
  if ! KIND_EXPERIMENTAL_DOCKER_NETWORK=$net "$kind" create cluster --name "$cluster" --image "${image_of[$r]}" \
    --config "$work/kind-config.yaml" --retain --wait 5m > "$out/$r-create.log" 2>&1; then
    cat "$out/$r-create.log" >&2
    node_logs "$cluster"
    die "$r: the cluster could not be created"
  fi
  "$kind" load image-archive "$images_tar" --name "$cluster" > "$out/$r-load.log" 2>&1 \
    || { cat "$out/$r-load.log" >&2; node_logs "$cluster"; die "$r: loading the test images failed"; }
  log "$r: cluster ready with the test images in $(since "$t")"

  t=$(date +%s) grc=0
  log "$r: running the $suite suite with $procs processes (log: $out/$r-e2e.log)"
  # KUBERNETES_CONFORMANCE_TEST as kind's CI sets it; e2e.test's flags as
  # hack/ginkgo-e2e.sh passes them for --provider=skeleton.
  KUBERNETES_CONFORMANCE_TEST=y "$tools/ginkgo" --procs="$procs" --timeout=3h --no-color \
    "${focus_args[@]}" --skip="$skip" --label-filter="$label_filter" \
    --output-dir="$out" --junit-report="$r-junit.xml" \
    "$tools/e2e.test" -- \
    --kubeconfig="$KUBECONFIG" --kubectl-path="$work/kubectl" --provider=skeleton --num-nodes=2 \
    --report-dir="$out/$r-report" --disable-log-dump=true > "$out/$r-e2e.log" 2>&1 || grc=$?
  grep -E '^(Ran [0-9]+ of|FAIL!|SUCCESS!|Test Suite (Passed|Failed))' "$out/$r-e2e.log" >&2 || true
  log "$r: suite finished in $(since "$t") (ginkgo exit $grc)"
  if [[ ! -s $out/$r-junit.xml ]]; then
    tail -n 40 "$out/$r-e2e.log" >&2
    die "$r: no JUnit report"
  fi
  reports+=("$r=$out/$r-junit.xml")
  # this run alone, at once (the comparison waits for the last run)
  go run ./test/conformance/junitdiff "$r=$out/$r-junit.xml" > "$out/$r-summary.md" || true
  sed -n '1,7p' "$out/$r-summary.md" >&2
  "$kind" delete cluster --name "$cluster" > /dev/null 2>&1 || true
done

# --- 5. comparison -----------------------------------------------------------
rc=0
go run ./test/conformance/junitdiff "${reports[@]}" > "$out/comparison.md" || rc=$?
cat "$out/comparison.md"
log "reports and comparison in $out; whole run $(since "$tier_start") (exit $rc)"
exit "$rc"
