#!/usr/bin/env bash
# Builds Docker 29's daemon from the Go module proxy into OUT_DIR: dockerd
# and docker-proxy of the module github.com/moby/moby/v2 at VERSION
# (v2.0.0-beta.24 is Docker 29.x), static (CGO_ENABLED=0) with the build
# tags of moby's own static builds (hack/make.sh: netgo osusergo
# static_build nri_no_wasm). Nothing of moby is kept but the two binaries.
# Usage: build-engine.sh VERSION OUT_DIR
set -o errexit -o nounset -o pipefail

version=$1 out=$2
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
go_build_init docker29 "$out"
moby=github.com/moby/moby/v2
go_module_build "$out.tmp" moby "$moby@$version" \
  "-X $moby/dockerversion.Version=$version -X $moby/dockerversion.GitCommit=$version -X $moby/dockerversion.PlatformName=kind-entrypoint-test" \
  "netgo osusergo static_build nri_no_wasm" "$moby/cmd/dockerd" "$moby/cmd/docker-proxy"
go_build_done
