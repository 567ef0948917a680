# shellcheck shell=bash
# The one debootstrap of the tiers: the e2e base image (test/e2e/base/
# build.sh) and the VM tier's disk (test/vm/disk/build.sh) are made with it.
# Both cache keys hash this file (test/e2e/run.sh, test/vm/run.sh), so an
# edit here builds a new base image and a new VM disk.

# debootstrap_minbase WHAT ROOT PACKAGES CACHE MIRROR [SUITE]: a minbase
# Debian SUITE (default bookworm; test/stack uses trixie) tree in ROOT with
# the packages the file PACKAGES lists (one a line; blank lines and #
# comments skipped). The .debs are kept in
# CACHE/debs for the next run; an empty MIRROR is debootstrap's default.
# Its log goes beside ROOT; on failure the log's tail goes to stderr and it
# returns 1. WHAT prefixes its progress line.
debootstrap_minbase() {
  local what=$1 root=$2 packages=$3 cache=$4 mirror=$5 suite=${6:-bookworm} include log
  include=$(grep -v '^[[:space:]]*\(#\|$\)' "$packages" | paste -sd, -)
  log=$(dirname "$root")/debootstrap.log
  mkdir -p "$cache/debs"
  echo "$what: debootstrap $suite with $include" >&2
  # shellcheck disable=SC2086 # an empty mirror must vanish
  debootstrap --variant=minbase --include="$include" \
    --cache-dir="$cache/debs" "$suite" "$root" $mirror > "$log" 2>&1 || {
    tail -n 50 "$log" "$root/debootstrap/debootstrap.log" >&2 || true
    return 1
  }
}
