#!/usr/bin/env bash
# arm64 tier: the unit and golden tests built for arm64 (GOARCH=arm64) and
# run under qemu-user (what `make test-arm64` runs). See docs/testing.md and
# README.md, "Architectures".
#
# Installs Debian's qemu-user-static when it is missing, then runs
#   GOARCH=arm64 go test -json -exec qemu-aarch64-static ./...
# with ENTRYPOINT_TEST_EMULATOR naming the emulator: the sandboxed packages
# make their read-only sandbox in a way qemu-user can run (nstest), tests
# that start a binary built for arm64 start it through the emulator, and the
# few tests that user-mode emulation cannot run skip, saying why
# (nstest.SkipEmulated). No binfmt_misc entry is registered: that is the
# host kernel's, shared by everything on it.
#
# test/arm64/summary, built for this machine, prints each package's line as
# it ends, then per package the tests and subtests passed, failed and
# skipped, each skip's reason and each failure's output; it fails the run
# when a package with tests ran none (skipped whole). The JSON stays in
# ARM64_TEST_JSON (default bin/test-arm64.json).
#
# Environment: ARM64_GO_TEST_ARGS (extra `go test` arguments), ARM64_TEST_JSON.
set -o errexit -o nounset -o pipefail

# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# Root, as for `make unit`: the sandboxed packages need it, and fail the run
# rather than skip without it.
tier_init arm64

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
qemu=/usr/bin/qemu-aarch64-static
[[ -x $qemu ]] || apt_install "$tmp/apt.log" qemu-user-static
log "$("$qemu" --version | head -n 1)"

go build -o "$tmp/summary" ./test/arm64/summary
json=${ARM64_TEST_JSON:-bin/test-arm64.json}
mkdir -p "$(dirname "$json")"

export GOARCH=arm64 CGO_ENABLED=0 ENTRYPOINT_TEST_EMULATOR=$qemu
go vet ./...
rc=0
# -timeout: internal/boot's tests take minutes under emulation on a loaded
# machine, near go test's default of 10 minutes per package.
# shellcheck disable=SC2086 # ARM64_GO_TEST_ARGS is a list of arguments
go test -json -count=1 -timeout 30m -exec "$qemu" ${ARM64_GO_TEST_ARGS:-} ./... \
  | tee "$json" | "$tmp/summary" || rc=$?
log "finished in $(since "$tier_start") (exit $rc); go test -json output in $json"
exit "$rc"
