#!/usr/bin/env bash
# Builds kind v0.33.0's container runtime from the Go module proxy into
# OUT_DIR, from the tags kind's base image builds (versions): containerd,
# ctr and containerd-shim-runc-v2 (kind's build tags: no optional
# snapshotters), runc (cgo, with seccomp, linked statically against
# Debian's libseccomp), crictl, the CNI plugins kind ships (OUT_DIR/cni:
# host-local, loopback, ptp, portmap) and containerd-fuse-overlayfs-grpc.
# All static, so the node's libc does not matter.
# Usage: build-runtime.sh VERSIONS_FILE OUT_DIR
set -o errexit -o nounset -o pipefail

versions=$1 out=$2
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=/dev/null
source "$versions"
go_build_init stack "$out"
[[ -e /usr/lib/x86_64-linux-gnu/libseccomp.a ]] || apt_install "$work/apt.log" libseccomp-dev

ctrd=github.com/containerd/containerd/v2
go_module_build "$out.tmp" containerd "$ctrd@$CONTAINERD" "-X $ctrd/version.Version=$CONTAINERD" \
  "no_aufs no_zfs no_btrfs no_devmapper" "$ctrd/cmd/containerd" "$ctrd/cmd/ctr" "$ctrd/cmd/containerd-shim-runc-v2"
# runc needs cgo for seccomp; Debian's libseccomp-dev has libseccomp.a.
CGO_ENABLED=1 go_module_build "$out.tmp" runc "github.com/opencontainers/runc@$RUNC" \
  "-X main.version=${RUNC#v} -extldflags -static" "seccomp netgo osusergo urfave_cli_no_docs" \
  github.com/opencontainers/runc
go_module_build "$out.tmp" crictl "sigs.k8s.io/cri-tools@$CRI_TOOLS" "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS" "" \
  sigs.k8s.io/cri-tools/cmd/crictl
cni=github.com/containernetworking/plugins
go_module_build "$out.tmp/cni" cni "$cni@$CNI_PLUGINS" "-X $cni/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS" "" \
  "$cni/plugins/ipam/host-local" "$cni/plugins/main/loopback" "$cni/plugins/main/ptp" "$cni/plugins/meta/portmap"
fo=github.com/containerd/fuse-overlayfs-snapshotter/v2/cmd/containerd-fuse-overlayfs-grpc
go_module_build "$out.tmp" fuse-overlayfs "github.com/containerd/fuse-overlayfs-snapshotter/v2@$FUSE_OVERLAYFS_SNAPSHOTTER" \
  "-X $fo/version.Version=$FUSE_OVERLAYFS_SNAPSHOTTER" "" "$fo"
go_build_done
