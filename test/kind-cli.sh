#!/usr/bin/env bash
# Prints the path of kind's CLI at VERSION (default v0.23.0, the version the
# node image must satisfy as a client), building it from the Go module proxy
# once, static, so that it runs in the VM too. Every tier gets kind from
# here: test/e2e, test/podman and test/cluster run it on this host,
# test/vm/run.sh copies it into its VM. Cached by version under
# KIND_CLI_CACHE (default /var/cache/kind-entrypoint-kind).
# Usage: kind-cli.sh [VERSION]
set -o errexit -o nounset -o pipefail

version=${1:-v0.23.0}
dir=${KIND_CLI_CACHE:-/var/cache/kind-entrypoint-kind}/kind-$version
bin=$dir/kind
[[ -d /usr/local/go/bin ]] && export PATH="$PATH:/usr/local/go/bin"

if [[ ! -x $bin ]]; then
  mkdir -p "$dir"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # Outside this module: go install pkg@version needs none.
  (cd "$work" && GOBIN=$work GOFLAGS= CGO_ENABLED=0 go install "sigs.k8s.io/kind@$version") >&2
  mv "$work/kind" "$bin"
fi
printf '%s\n' "$bin"
