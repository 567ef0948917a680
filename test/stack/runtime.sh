#!/usr/bin/env bash
# Prints the directory of kind v0.33.0's container runtime (containerd,
# runc, crictl, the CNI plugins: build-runtime.sh at the versions in
# `versions`), building it from the Go module proxy when it is missing.
# Cached in STACK_STATE_DIR (default /var/cache/kind-entrypoint-stack) as
# runtime-HASH, HASH of its recipe (versions, build-runtime.sh,
# test/lib.sh); older builds are removed. The stack tier builds its base
# image on it; the Docker 29 tier (test/docker29) runs its engine on it.
# Usage: runtime.sh (as root)
set -o errexit -o nounset -o pipefail

# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
tier_init stack "${STACK_STATE_DIR:-/var/cache/kind-entrypoint-stack}"
here=test/stack
# shellcheck source=test/stack/versions
source "$here/versions"

rt_hash=$(cat "$here/versions" "$here/build-runtime.sh" test/lib.sh | sha256sum | cut -c1-12)
rt=$state/runtime-$rt_hash
t=$(date +%s)
if [[ -x $rt/containerd && -x $rt/runc && -x $rt/cni/ptp ]]; then
  log "runtime $rt present"
else
  log "building containerd $CONTAINERD, runc $RUNC, crictl $CRI_TOOLS, CNI plugins $CNI_PLUGINS (cold: about 10 minutes on 2 cores; log: $log_dir/build-runtime.log)"
  bash "$here/build-runtime.sh" "$here/versions" "$rt" > "$log_dir/build-runtime.log" 2>&1 \
    || { grep -v '^go: downloading' "$log_dir/build-runtime.log" | tail -n 30 >&2; die "building the runtime failed"; }
  find "$state" -maxdepth 1 -name 'runtime-*' ! -path "$rt" -exec rm -rf {} +
fi
log "runtime ready in $(since "$t")"
printf '%s\n' "$rt"
