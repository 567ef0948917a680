#!/usr/bin/env bash
# Builds the e2e base image locally: no image registry is needed, only a
# Debian mirror. Usage: build.sh TAG PACKAGES_FILE CACHE_DIR [SUITE]
# (SUITE: Debian's release, default bookworm; test/stack builds trixie).
#
# The rootfs tarball is kept as CACHE_DIR/TAG-NAME.tar, so a lost Docker image
# store costs one `docker import`, not a debootstrap; the .debs are kept in
# CACHE_DIR/debs for the next debootstrap (test/debootstrap.sh). The caller
# names TAG after a hash of this script, test/debootstrap.sh and the package
# list, so editing any of them builds a new image.
set -o errexit -o nounset -o pipefail

# shellcheck source=test/debootstrap.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../debootstrap.sh"

tag=$1 packages_file=$2 cache=$3 suite=${4:-bookworm}
mirror=${E2E_DEBIAN_MIRROR:-}   # empty: debootstrap's default mirror

tarball="$cache/rootfs-${tag##*:}.tar"

if [[ ! -s $tarball ]]; then
  work=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  debootstrap_minbase base "$work/root" "$packages_file" "$cache" "$mirror" "$suite" || exit 1
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
