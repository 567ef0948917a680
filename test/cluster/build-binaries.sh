#!/usr/bin/env bash
# Builds the Kubernetes components, etcd and CoreDNS from the Go module
# proxy, static and trimmed, into OUT_DIR. Nothing is pulled but Go modules.
# Usage: build-binaries.sh VERSIONS_FILE OUT_DIR
#
# k8s.io/kubernetes is not meant to be required as a module: its go.mod
# points every k8s.io/* staging module at ./staging. Built from a module of
# our own that requires it, each staging module is replaced by its published
# v0.MINOR.PATCH, as ENV.md records.
set -o errexit -o nounset -o pipefail

versions=$1 out=$2
# shellcheck source=/dev/null
source "$versions"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
[[ -d /usr/local/go/bin ]] && export PATH="$PATH:/usr/local/go/bin"

log() { printf '%s cluster: %s\n' "$(date +%T)" "$*" >&2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out.tmp"

# --- Kubernetes --------------------------------------------------------------
k8s_dir=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -n $k8s_dir ]] || { log "k8s.io/kubernetes@$KUBERNETES: no module directory"; exit 1; }
staging_version=v0.${KUBERNETES#v1.}
mkdir "$work/k8s"
{
  echo "module kind-entrypoint.test/cluster-k8s"
  echo "go 1.26"
  echo "require k8s.io/kubernetes $KUBERNETES"
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$k8s_dir/go.mod" \
    | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
} > "$work/k8s/go.mod"
cmds=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
pkgs=()
for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
t=$(date +%s)
log "building Kubernetes $KUBERNETES: ${cmds[*]}"
# The version the binaries report (kubeadm checks the kubelet's, and picks
# image tags by its own).
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<< "$KUBERNETES") -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES"
(cd "$work/k8s" && go build -trimpath -ldflags "$ldflags" -o "$out.tmp/" "${pkgs[@]}")
log "Kubernetes built in $(( $(date +%s) - t ))s"

# --- etcd --------------------------------------------------------------------
t=$(date +%s)
mkdir "$work/etcd"
printf 'module kind-entrypoint.test/cluster-etcd\ngo 1.26\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD" > "$work/etcd/go.mod"
(cd "$work/etcd" && go build -trimpath -ldflags '-s -w' -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3)
log "etcd $ETCD built in $(( $(date +%s) - t ))s"

# --- CoreDNS -----------------------------------------------------------------
t=$(date +%s)
mkdir "$work/coredns"
printf 'module kind-entrypoint.test/cluster-coredns\ngo 1.26\nrequire github.com/coredns/coredns %s\n' "$COREDNS" > "$work/coredns/go.mod"
(cd "$work/coredns" && go build -trimpath -ldflags '-s -w' -o "$out.tmp/coredns" github.com/coredns/coredns)
log "CoreDNS $COREDNS built in $(( $(date +%s) - t ))s"

rm -rf "$out"
mv "$out.tmp" "$out"
