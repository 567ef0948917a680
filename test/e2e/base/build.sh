#!/usr/bin/env bash
# Builds the e2e base image locally: no image registry is needed, only a
# Debian mirror. Usage: build.sh TAG PACKAGES_FILE CACHE_DIR
#
# The rootfs tarball is kept as CACHE_DIR/TAG-NAME.tar, so a lost Docker image
# store costs one `docker import`, not a debootstrap; the .debs are kept in
# CACHE_DIR/debs for the next debootstrap. The caller names TAG after a hash of
# this script and the package list, so editing either builds a new image.
set -o errexit -o nounset -o pipefail

tag=$1 packages_file=$2 cache=$3
suite=bookworm
mirror=${E2E_DEBIAN_MIRROR:-}   # empty: debootstrap's default mirror

tarball="$cache/rootfs-${tag##*:}.tar"
mkdir -p "$cache/debs"

if [[ ! -s $tarball ]]; then
  include=$(grep -v '^[[:space:]]*\(#\|$\)' "$packages_file" | paste -sd, -)
  work=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "base: debootstrap $suite with $include" >&2
  # shellcheck disable=SC2086 # an empty mirror must vanish
  debootstrap --variant=minbase --include="$include" \
    --cache-dir="$cache/debs" "$suite" "$work/root" $mirror \
    > "$work/debootstrap.log" 2>&1 || {
      tail -n 50 "$work/debootstrap.log" "$work/root/debootstrap/debootstrap.log" >&2 || true
      exit 1
    }
  # Nothing in the tests installs packages: drop apt's caches and lists, and
  # the build host's identity that debootstrap copied in.
  rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"* \
         "$work/root/etc/hostname"
  : > "$work/root/etc/machine-id"
  tar --numeric-owner -C "$work/root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi

echo "base: docker import $tarball as $tag" >&2
docker import "$tarball" "$tag" > /dev/null
