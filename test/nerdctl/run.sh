#!/usr/bin/env bash
# nerdctl tier: kind's nerdctl provider (KIND_EXPERIMENTAL_PROVIDER=nerdctl)
# with the cluster tier's node image: a real 1+1 Kubernetes cluster made by
# the kind CLI under nerdctl, checked, restarted with new addresses and
# checked again (what `make e2e-nerdctl` runs). See test/nerdctl/README.md.
#
# Works from a fresh Debian 12 machine as root, with no stdin and no image
# registry, and is idempotent:
#   1. installs Debian's CNI plugins (containernetworking-plugins);
#   2. builds nerdctl and containerd (with its runc shim) from the Go module
#      proxy, once per version, cached in NERDCTL_STATE_DIR;
#   3. takes the e2e lock (waiting up to 90 minutes) and holds it to the
#      end: clusters are serialized on this machine;
#   4. builds the cluster tier's node image (test/cluster/run.sh
#      --build-only, which builds Kubernetes the first time) and the kind CLI
#      of test/cluster/versions;
#   5. starts a containerd of its own (socket, root and state directories of
#      this tier; runc behind the capability wrapper test/e2e/runtimeshim
#      where the bounding set is short) and moves the node image into it
#      (docker save | nerdctl load) unless it holds that image id;
#   6. runs go test -tags 'cluster nerdctl' -run TestNerdctl ./test/cluster/;
#   7. on the way out, whatever the result: removes every container and
#      network of its namespace and stops its containerd. Images stay in
#      containerd's root, a cache like Docker's.
#
# Environment: NERDCTL_GO_TEST_ARGS (extra `go test` arguments),
# NERDCTL_STATE_DIR (default /var/cache/kind-entrypoint-nerdctl).
set -o errexit -o nounset -o pipefail

# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
tier_init nerdctl "${NERDCTL_STATE_DIR:-/var/cache/kind-entrypoint-nerdctl}"

# nerdctl v1 is the line made for containerd 1.6 and 1.7; containerd 1.7 is
# the first whose restart monitor has the on-failure policy kind's provider
# asks for (--restart=on-failure:1): Debian 12's containerd 1.6.20 offers
# only "always", and nerdctl refuses the run (README.md).
NERDCTL_VERSION=v1.7.7
CONTAINERD_VERSION=v1.7.29

e2e_state=${E2E_STATE_DIR:-/var/cache/kind-entrypoint-e2e}
data=/var/lib/kind-entrypoint-nerdctl # containerd's root, nerdctl's data, CNI configurations
run_dir=/run/kind-entrypoint-nerdctl  # containerd's state and socket
namespace=kind-ep-nd
prefix=kind-ep-nd-
bin=$state/bin-nerdctl-$NERDCTL_VERSION-containerd-$CONTAINERD_VERSION

mkdir -p "$data" "$run_dir" "$e2e_state"

# --- 1. packages -------------------------------------------------------------
missing=()
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local ]] || missing+=(containernetworking-plugins)
apt_install "$log_dir/apt.log" "${missing[@]}"

# --- 2. nerdctl and containerd -----------------------------------------------
# build_module MODULE@VERSION TAGS PACKAGE...: go build in the module's own
# directory, as its main module, into $bin.new. Not `go install
# MODULE/cmd/nerdctl@VERSION`: that asks the proxy for the module's list of
# versions, which it refuses for nerdctl (403); the version itself
# downloads. -mod=mod: the module zip has no complete vendor directory.
build_module() {
  local module=$1 tags=$2 dir
  shift 2
  dir=$(module_dir "$module") || die "go mod download $module failed"
  (cd "$dir" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags '-s -w' -o "$bin.new/" "$@") \
    >> "$log_dir/build.log" 2>&1 || { tail -n 20 "$log_dir/build.log" >&2; die "building $module failed"; }
}
if [[ ! -x $bin/nerdctl || ! -x $bin/containerd || ! -x $bin/containerd-shim-runc-v2 ]]; then
  t=$(date +%s)
  log "building nerdctl $NERDCTL_VERSION and containerd $CONTAINERD_VERSION (cold: about 9 minutes on 2 cores; log: $log_dir/build.log)"
  rm -rf "$bin.new" && mkdir -p "$bin.new"
  : > "$log_dir/build.log"
  build_module "github.com/containerd/nerdctl@$NERDCTL_VERSION" "" ./cmd/nerdctl
  # no_btrfs: btrfs needs cgo; the devmapper and zfs snapshotters are unused.
  build_module "github.com/containerd/containerd@$CONTAINERD_VERSION" "no_btrfs no_devmapper no_zfs" \
    ./cmd/containerd ./cmd/containerd-shim-runc-v2
  rm -rf "$bin" && mv "$bin.new" "$bin"
  log "built in $(since "$t")"
fi

# --- 3. the e2e lock ---------------------------------------------------------
# For the whole run: the node image build below drives the same dockerd as
# the other tiers, and two clusters at once would share 2 cores.
t=$(date +%s)
log "waiting for $e2e_state/lock"
tier_lock "$e2e_state/lock" 5400
export E2E_LOCK_HELD=1
log "lock taken after $(since "$t")"

# --- 4. the node image and the kind CLI --------------------------------------
t=$(date +%s)
# shellcheck source=test/cluster/versions
source test/cluster/versions
# 9>&-: the build must not hold our lock (it knows it is held: E2E_LOCK_HELD)
images=$(bash test/cluster/run.sh --build-only 9>&-) || die "building the cluster node image (test/cluster/run.sh --build-only) failed"
docker_image=$(head -n 1 <<< "$images")
image_id=$(docker image inspect -f '{{.Id}}' "$docker_image") || die "no image $docker_image"
kind_cli=$(bash test/kind-cli.sh "$KIND") || die "building kind $KIND (test/kind-cli.sh) failed"
log "node image $docker_image and kind $KIND ready in $(since "$t")"

# --- 5. containerd, and the image in it --------------------------------------
# runtime/: what containerd's PATH finds first: the runc shim built with it,
# and, where the capability bounding set is short, the wrapper as `runc`
# (it execs the real runc). kind's provider cannot name a runtime.
runtime_path=$run_dir/runtime
mkdir -p "$runtime_path"
ln -sfn "$bin/containerd-shim-runc-v2" "$runtime_path/containerd-shim-runc-v2"
if capabilities_short; then
  log "capability bounding set is short (missing mask $cap_missing_mask): containerd runs runc through the runtime wrapper"
  build_runtime_shim "$runtime_path/runc"
else
  rm -f "$runtime_path/runc"
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

# Containers of one nerdctl network reach each other whatever their
# addresses, as on a Docker network: pods of one node reach pods of another
# with pod addresses. nerdctl's networks run CNI's firewall plugin, which
# accepts forwarded traffic only from and to each container's own address;
# Docker sets FORWARD's policy to DROP, and with br_netfilter even traffic
# between two ports of one bridge goes through FORWARD. Without this rule a
# pod on the worker never reached CoreDNS or a pod on the control plane.
# CNI-ADMIN is the plugin's chain for an administrator's own rules.
fw_rule=(-m physdev --physdev-is-bridged -m comment --comment "kind-entrypoint-nerdctl: containers of one bridge reach each other" -j ACCEPT)
for ipt in iptables ip6tables; do
  "$ipt" -w -N CNI-ADMIN 2> /dev/null || true
  "$ipt" -w -C CNI-ADMIN "${fw_rule[@]}" 2> /dev/null || "$ipt" -w -A CNI-ADMIN "${fw_rule[@]}" || die "$ipt: adding the CNI-ADMIN rule failed"
done

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
# shellcheck disable=SC2317 # the EXIT trap calls it
stop_containerd() {
  [[ -n $containerd_pid ]] || return 0
  remove_all
  kill "$containerd_pid" 2> /dev/null || true
  wait "$containerd_pid" 2> /dev/null || true
  rm -f "$run_dir/containerd.pid"
  containerd_pid=
  for ipt in iptables ip6tables; do
    while "$ipt" -w -D CNI-ADMIN "${fw_rule[@]}" 2> /dev/null; do :; done
  done
}
trap stop_containerd EXIT
# A containerd an interrupted run left behind (its pid file, and its
# command line naming this tier's configuration).
if [[ -s $run_dir/containerd.pid ]]; then
  old=$(cat "$run_dir/containerd.pid")
  if grep -qF "$run_dir/containerd.toml" "/proc/$old/cmdline" 2> /dev/null; then
    log "stopping the containerd ($old) an interrupted run left"
    kill "$old"
    for _ in $(seq 50); do [[ -d /proc/$old ]] || break; sleep 0.2; done
  fi
fi
: > "$log_dir/containerd.log"
PATH="$runtime_path:$PATH" start_daemon "$log_dir/containerd.log" "$bin/containerd" --config "$run_dir/containerd.toml"
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
if [[ $("$nerdctl" image inspect -f '{{.Id}}' "$docker_image" 2> /dev/null) != "$image_id" ]]; then
  docker save "$docker_image" | "$nerdctl" load > "$log_dir/load.log" 2>&1 \
    || { tail -n 20 "$log_dir/load.log" >&2; die "nerdctl load failed"; }
  loaded=$("$nerdctl" image inspect -f '{{.Id}}' "$docker_image" 2> /dev/null) || true
  [[ $loaded == "$image_id" ]] || die "nerdctl load did not give image $image_id (got ${loaded:-none})"
  log "node image loaded into containerd in $(since "$t")"
fi

# --- 6. tests ----------------------------------------------------------------
export CLUSTER_IMAGE=$docker_image CLUSTER_KIND=$kind_cli CLUSTER_LOG_DIR=$log_dir
export NERDCTL_CLI=$nerdctl NERDCTL_NAME_PREFIX=$prefix
t=$(date +%s)
rc=0
# shellcheck disable=SC2086 # NERDCTL_GO_TEST_ARGS is a list of arguments
go test -tags 'cluster nerdctl' -v -count=1 -timeout 40m -run '^TestNerdctl$' ${NERDCTL_GO_TEST_ARGS:-} ./test/cluster/ 9>&- || rc=$?
log "go test finished in $(since "$t") (exit $rc); whole tier $(since "$tier_start")"
exit "$rc"
