#!/usr/bin/env bash
# Builds the Kubernetes components, etcd and CoreDNS from the Go module
# proxy, static and trimmed, into OUT_DIR. Nothing is pulled but Go modules.
# Usage: build-binaries.sh VERSIONS_FILE OUT_DIR
#
# Kubernetes is built from the module k8s-module.sh writes.
set -o errexit -o nounset -o pipefail

versions=$1 out=$2
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=/dev/null
source "$versions"
go_build_init cluster "$out"

# --- Kubernetes --------------------------------------------------------------
bash "$(dirname "${BASH_SOURCE[0]}")/k8s-module.sh" "$versions" "$work/k8s"
cmds=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
pkgs=()
for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
t=$(date +%s)
log "building Kubernetes $KUBERNETES: ${cmds[*]}"
ldflags=$(cat "$work/k8s/ldflags")
(cd "$work/k8s" && go build -trimpath -ldflags "$ldflags" -o "$out.tmp/" "${pkgs[@]}")
log "Kubernetes built in $(since "$t")"

# --- etcd --------------------------------------------------------------------
t=$(date +%s)
mkdir "$work/etcd"
printf 'module kind-entrypoint.test/cluster-etcd\ngo 1.26\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD" > "$work/etcd/go.mod"
(cd "$work/etcd" && go build -trimpath -ldflags '-s -w' -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3)
log "etcd $ETCD built in $(since "$t")"

# --- CoreDNS -----------------------------------------------------------------
t=$(date +%s)
mkdir "$work/coredns"
printf 'module kind-entrypoint.test/cluster-coredns\ngo 1.26\nrequire github.com/coredns/coredns %s\n' "$COREDNS" > "$work/coredns/go.mod"
(cd "$work/coredns" && go build -trimpath -ldflags '-s -w' -o "$out.tmp/coredns" github.com/coredns/coredns)
log "CoreDNS $COREDNS built in $(since "$t")"
go_build_done
