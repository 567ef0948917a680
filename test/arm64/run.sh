#!/usr/bin/env bash
# arm64 tier: the unit and golden tests built for arm64 (GOARCH=arm64) and
# run under qemu-user (what `make test-arm64` runs). See README.md,
# "Architectures".
#
# Installs Debian's qemu-user-static when it is missing, then runs
#   GOARCH=arm64 go test -exec qemu-aarch64-static ./...
# with ENTRYPOINT_TEST_EMULATOR naming the emulator: tests that start a
# binary built for arm64 start it through it, and the few tests that user-mode
# emulation cannot run skip, saying why (nstest.SkipEmulated). No binfmt_misc
# entry is registered: that is the host kernel's, shared by everything on it.
#
# Environment: ARM64_GO_TEST_ARGS (extra `go test` arguments).
set -o errexit -o nounset -o pipefail

start=$(date +%s)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
log() { printf '%s arm64: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ -d /usr/local/go/bin ]] && export PATH="$PATH:/usr/local/go/bin"
command -v go > /dev/null || die "go not found (Go 1.26 is expected at /usr/local/go)"
qemu=/usr/bin/qemu-aarch64-static
if [[ ! -x $qemu ]]; then
  [[ $(id -u) == 0 ]] || die "$qemu is missing; as root this script installs qemu-user-static"
  log "installing qemu-user-static"
  export DEBIAN_FRONTEND=noninteractive
  apt_log=$(mktemp)
  trap 'rm -f "$apt_log"' EXIT
  # Lock::Timeout: another session's apt may hold the dpkg lock for a while.
  { apt-get -o DPkg::Lock::Timeout=600 update -q \
    && apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends qemu-user-static; } > "$apt_log" 2>&1 \
    || { tail -n 20 "$apt_log" >&2; die "installing qemu-user-static failed"; }
fi
log "$("$qemu" --version | head -n 1)"

export GOARCH=arm64 CGO_ENABLED=0 ENTRYPOINT_TEST_EMULATOR=$qemu
go vet ./...
rc=0
# shellcheck disable=SC2086 # ARM64_GO_TEST_ARGS is a list of arguments
# -timeout: internal/boot's fault-injection and hostile-input tests take
# about 8 minutes under emulation on a loaded machine, near go test's
# default 10 minutes per package.
go test -count=1 -timeout 30m -exec "$qemu" ${ARM64_GO_TEST_ARGS:-} ./... || rc=$?
log "finished in $(( $(date +%s) - start ))s (exit $rc)"
exit "$rc"
