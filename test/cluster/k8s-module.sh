#!/usr/bin/env bash
# Writes DIR/go.mod: a module of our own that requires k8s.io/kubernetes at
# the version in VERSIONS_FILE, with every k8s.io/* staging module replaced
# by its published v0.MINOR.PATCH. Everything built from Kubernetes' module
# (the binaries of build-binaries.sh, the conformance tools of
# test/conformance/build-tools.sh) is built from this one recipe, so the Go
# build cache of one serves the other.
# It also writes DIR/ldflags, the linker flags that stamp the version the
# binaries report (kubeadm checks the kubelet's and picks image tags by its
# own; e2e.test compares it with the server's).
# Usage: k8s-module.sh VERSIONS_FILE DIR
#
# k8s.io/kubernetes is not meant to be required as a module: its go.mod
# points every k8s.io/* staging module at ./staging (ENV.md).
set -o errexit -o nounset -o pipefail

versions=$1 dir=$2
# shellcheck source=/dev/null
source "$versions"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
[[ -d /usr/local/go/bin ]] && export PATH="$PATH:/usr/local/go/bin"

k8s_dir=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -n $k8s_dir ]] || { echo "k8s-module.sh: k8s.io/kubernetes@$KUBERNETES: no module directory" >&2; exit 1; }
staging_version=v0.${KUBERNETES#v1.}
mkdir -p "$dir"
{
  echo "module kind-entrypoint.test/cluster-k8s"
  echo "go 1.26"
  echo "require k8s.io/kubernetes $KUBERNETES"
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$k8s_dir/go.mod" \
    | awk -v v="$staging_version" '{print "replace " $1 " => " $1 " " v}'
} > "$dir/go.mod"
echo "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<< "$KUBERNETES") -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES" > "$dir/ldflags"
