#!/usr/bin/env bash
# nerdctl tier: kind's nerdctl provider (KIND_EXPERIMENTAL_PROVIDER=nerdctl)
# with the cluster tier's node image: a real 1+1 Kubernetes cluster made by
# the kind CLI under nerdctl, checked, restarted and checked again (what
# `make e2e-nerdctl` runs). See test/nerdctl/README.md.
#
# Works from a fresh Debian 12 machine as root, with no stdin and no image
# registry, and is idempotent. It holds the e2e lock for its whole run:
#   1. installs Debian's CNI plugins (containernetworking-plugins);
#   2. builds nerdctl and containerd (with its runc shim) from the Go module
#      proxy, once per version, cached in NERDCTL_STATE_DIR;
#   3. builds the cluster tier's node image (test/cluster/run.sh
#      --build-only, which builds Kubernetes the first time) and the kind CLI
#      of test/cluster/versions;
#   4. starts a containerd of its own (socket, root and state directories of
#      this tier; runc behind the capability wrapper test/e2e/runtimeshim
#      where the bounding set is short), and moves the node image into it
#      (docker save | nerdctl load) unless it holds that image id;
#   5. runs go test -tags 'cluster nerdctl' -run TestNerdctl ./test/cluster/;
#   6. on the way out, whatever the result: removes every container and
#      network of its namespace and stops its containerd. Images stay in
#      containerd's root, a cache like Docker's.
#
# Environment: NERDCTL_GO_TEST_ARGS (extra `go test` arguments),
# NERDCTL_STATE_DIR (default /var/cache/kind-entrypoint-nerdctl).
set -o errexit -o nounset -o pipefail

tier_start=$(date +%s)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"

# nerdctl v1 is the line made for containerd 1.6 and 1.7; containerd 1.7 is
# the first whose restart monitor has the on-failure policy that kind's
# provider asks for (--restart=on-failure:1): Debian 12's containerd 1.6.20
# offers only "always", and nerdctl refuses the run.
NERDCTL_VERSION=v1.7.7
CONTAINERD_VERSION=v1.7.29

state=${NERDCTL_STATE_DIR:-/var/cache/kind-entrypoint-nerdctl}
data=/var/lib/kind-entrypoint-nerdctl # containerd's root, nerdctl's data, CNI configurations
run_dir=/run/kind-entrypoint-nerdctl  # containerd's state and socket
e2e_state=${E2E_STATE_DIR:-/var/cache/kind-entrypoint-e2e}
log_dir=/var/log/kind-entrypoint-nerdctl
namespace=kind-ep-nd
prefix=kind-ep-nd-
bin=$state/bin-nerdctl-$NERDCTL_VERSION-containerd-$CONTAINERD_VERSION

log() { printf '%s nerdctl: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
since() { echo "$(( $(date +%s) - $1 ))s"; }
# shellcheck source=test/tier/lib.sh
source test/tier/lib.sh

[[ $(id -u) == 0 ]] || die "must run as root (runs containerd and rootful node containers)"
export DEBIAN_FRONTEND=noninteractive
[[ -d /usr/local/go/bin ]] && export PATH="$PATH:/usr/local/go/bin"
command -v go > /dev/null || die "go not found (Go 1.26 is expected at /usr/local/go)"
mkdir -p "$state" "$data" "$run_dir" "$e2e_state" "$log_dir"

# The e2e lock for the whole run: clusters are serialized on this machine,
# and the cluster tier's image build below drives the same dockerd.
exec 9> "$e2e_state/lock"
flock -w 5400 9 || die "another run still holds $e2e_state/lock after 90 minutes"
export E2E_LOCK_HELD=1

# --- 1. packages -------------------------------------------------------------
if [[ ! -x /usr/lib/cni/bridge ]]; then
  t=$(date +%s)
  log "installing containernetworking-plugins"
  # Lock::Timeout: another session's apt may hold the dpkg lock for a while.
  apt-get -o DPkg::Lock::Timeout=600 update -q > "$log_dir/apt.log" 2>&1 \
    || { tail -n 20 "$log_dir/apt.log" >&2; die "apt-get update failed"; }
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends containernetworking-plugins >> "$log_dir/apt.log" 2>&1 \
    || { tail -n 20 "$log_dir/apt.log" >&2; die "apt-get install failed"; }
  log "packages installed in $(since "$t")"
fi

# --- 2. nerdctl and containerd -----------------------------------------------
# build_module MODULE VERSION TAGS PACKAGE...: go build in the module's own
# directory, as its main module. Not `go install MODULE/cmd@VERSION`: that
# asks the proxy for the module's list of versions (deprecations), which it
# refuses for nerdctl (403); the version itself downloads. -mod=mod: the
# module zip has no complete vendor directory.
build_module() {
  local module=$1 version=$2 tags=$3 dir
  shift 3
  dir=$(GOFLAGS='' go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n $dir ]] || die "go mod download $module@$version failed"
  (cd "$dir" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags '-s -w' -o "$bin.new/" "$@") \
    >> "$log_dir/build.log" 2>&1 || { tail -n 20 "$log_dir/build.log" >&2; die "building $module@$version failed"; }
}
if [[ ! -x $bin/nerdctl ]]; then
  t=$(date +%s)
  log "building nerdctl $NERDCTL_VERSION and containerd $CONTAINERD_VERSION (log: $log_dir/build.log)"
  rm -rf "$bin.new" && mkdir -p "$bin.new"
  : > "$log_dir/build.log"
  build_module github.com/containerd/nerdctl "$NERDCTL_VERSION" "" ./cmd/nerdctl
  # no_btrfs: btrfs needs cgo; devmapper and zfs snapshotters are unused.
  build_module github.com/containerd/containerd "$CONTAINERD_VERSION" "no_btrfs no_devmapper no_zfs" \
    ./cmd/containerd ./cmd/containerd-shim-runc-v2
  rm -rf "$bin" && mv "$bin.new" "$bin"
  log "built in $(since "$t")"
fi

# --- 3. the node image and the kind CLI --------------------------------------
t=$(date +%s)
# shellcheck source=test/cluster/versions
source test/cluster/versions
# 9>&-: the build must not hold our lock (it knows it is held: E2E_LOCK_HELD)
images=$(bash test/cluster/run.sh --build-only 9>&-) || die "building the cluster node image (test/cluster/run.sh --build-only) failed"
docker_image=$(head -n 1 <<< "$images")
image_id=$(docker image inspect -f '{{.Id}}' "$docker_image") || die "no image $docker_image"
image_id=${image_id#sha256:}
# The tag is shared by every checkout on this machine.
require_own_binary "$docker_image" "$image_id"
kind_cli=$(bash test/kind-cli.sh "$KIND") || die "building kind $KIND (test/kind-cli.sh) failed"
log "node image $docker_image and kind $KIND ready in $(since "$t")"

# --- 4. containerd, and the image in it --------------------------------------
# runtime/: what containerd's PATH finds first: the runc shim built with it,
# and, where the capability bounding set is short, the wrapper as `runc`
# (it execs the real /usr/sbin/runc). kind's provider cannot name a runtime.
runtime_path=$run_dir/runtime
rm -rf "$runtime_path" && mkdir -p "$runtime_path"
ln -s "$bin/containerd-shim-runc-v2" "$runtime_path/containerd-shim-runc-v2"
caps_missing=$(missing_caps)
if [[ $caps_missing != 0x0 ]]; then
  log "capability bounding set is short (missing mask $caps_missing): containerd runs runc through the runtime wrapper"
  go build -trimpath -o "$runtime_path/runc" ./test/e2e/runtimeshim
fi
cat > "$run_dir/containerd.toml" << EOF
# Written by test/nerdctl/run.sh: the nerdctl tier's own containerd.
version = 2
root = "$data/containerd"
state = "$run_dir/containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$run_dir/containerd.sock"
[ttrpc]
  address = ""
[debug]
  address = ""
EOF
export NERDCTL_TOML=$run_dir/nerdctl.toml
cat > "$NERDCTL_TOML" << EOF
# Written by test/nerdctl/run.sh.
address = "unix://$run_dir/containerd.sock"
namespace = "$namespace"
data_root = "$data/nerdctl"
cni_path = "/usr/lib/cni"
cni_netconfpath = "$data/cni/net.d"
EOF
nerdctl=$bin/nerdctl

# remove_all removes every container and network of the tier's namespace
# and CNI directory: all of them are the tier's.
remove_all() {
  local c n
  mapfile -t c < <("$nerdctl" ps -a --format '{{.Names}}' 2> /dev/null || true)
  ((${#c[@]} == 0)) || { log "removing containers: ${c[*]}"; "$nerdctl" rm -f -v "${c[@]}" > /dev/null || true; }
  mapfile -t n < <("$nerdctl" network ls --format '{{.Name}}' 2> /dev/null | grep -vx -e host -e none -e bridge || true)
  ((${#n[@]} == 0)) || { log "removing networks: ${n[*]}"; "$nerdctl" network rm "${n[@]}" > /dev/null || true; }
}
containerd_pid=
cleanup() {
  [[ -n $containerd_pid ]] || return 0
  remove_all
  kill "$containerd_pid" 2> /dev/null || true
  wait "$containerd_pid" 2> /dev/null || true
  rm -f "$run_dir/containerd.pid"
  containerd_pid=
}
trap cleanup EXIT
# A containerd an interrupted run left behind (its pid file).
if [[ -s $run_dir/containerd.pid ]] && kill -0 "$(cat "$run_dir/containerd.pid")" 2> /dev/null; then
  kill "$(cat "$run_dir/containerd.pid")"
  sleep 2
fi
PATH="$runtime_path:$PATH" "$bin/containerd" --config "$run_dir/containerd.toml" > "$log_dir/containerd.log" 2>&1 9>&- &
containerd_pid=$!
echo "$containerd_pid" > "$run_dir/containerd.pid"
for _ in $(seq 100); do
  "$nerdctl" version > /dev/null 2>&1 && break
  kill -0 "$containerd_pid" 2> /dev/null || { tail -n 20 "$log_dir/containerd.log" >&2; die "containerd exited"; }
  sleep 0.2
done
"$nerdctl" version > /dev/null 2>&1 || die "containerd does not answer on $run_dir/containerd.sock"
remove_all # what an interrupted run left
log "nerdctl $("$nerdctl" version --format '{{.Client.Version}}'), containerd $("$nerdctl" version --format '{{range .Server.Components}}{{.Version}}{{end}}'), namespace $namespace"

t=$(date +%s)
if [[ $("$nerdctl" image inspect -f '{{.Id}}' "$docker_image" 2> /dev/null) != "sha256:$image_id" ]]; then
  docker save "$docker_image" | "$nerdctl" load > "$log_dir/load.log" 2>&1 \
    || { tail -n 20 "$log_dir/load.log" >&2; die "nerdctl load failed"; }
  loaded=$("$nerdctl" image inspect -f '{{.Id}}' "$docker_image" 2> /dev/null) || true
  [[ $loaded == "sha256:$image_id" ]] || die "nerdctl load did not give image $image_id (got ${loaded:-none})"
  log "node image loaded into containerd in $(since "$t")"
fi

# --- 5. tests ----------------------------------------------------------------
export CLUSTER_IMAGE=$docker_image CLUSTER_KIND=$kind_cli CLUSTER_LOG_DIR=$log_dir
export NERDCTL_CLI=$nerdctl NERDCTL_NAME_PREFIX=$prefix
t=$(date +%s)
rc=0
# shellcheck disable=SC2086 # NERDCTL_GO_TEST_ARGS is a list of arguments
go test -tags 'cluster nerdctl' -v -count=1 -timeout 40m -run '^TestNerdctl$' ${NERDCTL_GO_TEST_ARGS:-} ./test/cluster/ 9>&- || rc=$?
log "go test finished in $(since "$t") (exit $rc); whole tier $(since "$tier_start")"
exit "$rc"
