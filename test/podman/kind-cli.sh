#!/usr/bin/env bash
# Prints the path of the kind CLI the tiers drive (v0.23.0, the version the
# node image must satisfy as a client), building it from the Go module proxy
# once: test/podman/run.sh runs it on this host, test/vm/run.sh copies it
# into the VM. Cached by version under KIND_CLI_CACHE (default
# /var/cache/kind-entrypoint-podman).
set -o errexit -o nounset -o pipefail

version=v0.23.0
dir=${KIND_CLI_CACHE:-/var/cache/kind-entrypoint-podman}/kind-$version
bin=$dir/kind
[[ -d /usr/local/go/bin ]] && export PATH="$PATH:/usr/local/go/bin"

if [[ ! -x $bin ]]; then
  mkdir -p "$dir"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # Outside this module: go install pkg@version needs none. Static, so that
  # it runs in the VM too.
  (cd "$work" && GOBIN=$work GOFLAGS= CGO_ENABLED=0 go install "sigs.k8s.io/kind@$version") >&2
  mv "$work/kind" "$bin"
fi
printf '%s\n' "$bin"
