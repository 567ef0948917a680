#!/usr/bin/env bash
# Builds the VM tier's root disk: a Debian host (bookworm or trixie) with
# cgroup v2, Docker as root and rootless, and rootless podman. Needs root and
# a Debian mirror, no registry.
#
# Usage: build.sh OUT_DIR DISK_DIR CACHE_DIR RELEASE
#   RELEASE is Debian's release (debootstrap's suite): bookworm (Docker
#   20.10, podman 4.3, systemd 252) or trixie (Docker 26.1, podman 5.4,
#   systemd 257).
#   DISK_DIR holds `packages` (debootstrap --include), `packages-RELEASE`
#   (more for that release, if present) and `files/` (copied over the tree). OUT_DIR gets root.img (raw ext4, the whole disk is the
#   filesystem), vmlinuz and initrd.img (QEMU boots them directly: no boot
#   loader). The caller names OUT_DIR after a hash of DISK_DIR (this
#   script included) and test/debootstrap.sh, so editing either builds a new
#   disk. The .debs are kept in CACHE_DIR/debs for the next build.
set -o errexit -o nounset -o pipefail

# shellcheck source=test/debootstrap.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../debootstrap.sh"

out=$1 disk=$2 cache=$3 release=$4
mirror=${VM_DEBIAN_MIRROR:-}   # empty: debootstrap's default mirror
size=${VM_DISK_SIZE:-12G}      # sparse; two copies of the node image fit
user=rootless uid=1000

mkdir -p "$out"
work=$(mktemp -d "$cache/vmroot.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

# packages, and what this release alone needs (packages-RELEASE)
cat "$disk/packages" > "$work/packages"
[[ ! -f $disk/packages-$release ]] || cat "$disk/packages-$release" >> "$work/packages"
debootstrap_minbase "vm disk" "$root" "$work/packages" "$cache" "$mirror" "$release" || exit 1

# The non-root user of the rootless scenarios, with subordinate ids for
# newuidmap/newgidmap, and lingering: logind starts user@UID.service (the
# user's systemd, which rootless Docker runs under) at boot, no login needed.
chroot "$root" useradd --create-home --shell /bin/bash --uid "$uid" "$user"
echo "$user:100000:65536" > "$root/etc/subuid"
echo "$user:100000:65536" > "$root/etc/subgid"
mkdir -p "$root/var/lib/systemd/linger"
: > "$root/var/lib/systemd/linger/$user"

cp -a "$disk/files/." "$root/"
chown -R "$uid:$uid" "$root/home/$user"
chroot "$root" systemctl enable kind-vm-tier.service > /dev/null 2>&1
# Nothing logs in: no getty (its prompt would land in the serial log that
# carries the results). No timers that would start work mid-run.
chroot "$root" systemctl mask serial-getty@ttyS0.service getty@tty1.service \
  apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer > /dev/null 2>&1

echo kind-vm > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tkind-vm\n' > "$root/etc/hosts"
: > "$root/etc/machine-id"
rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*

kernel=$(find "$root/boot" -name 'vmlinuz-*' | sort -V | tail -n 1)
initrd=$root/boot/initrd.img-${kernel##*/vmlinuz-}
[[ -s $initrd ]] || { echo "vm disk: no initrd for $kernel" >&2; exit 1; }
cp "$kernel" "$out/vmlinuz.tmp"
cp "$initrd" "$out/initrd.img.tmp"

rm -f "$out/root.img.tmp"
truncate -s "$size" "$out/root.img.tmp"
mkfs.ext4 -q -F -L kindvm-root -d "$root" "$out/root.img.tmp"
mv "$out/vmlinuz.tmp" "$out/vmlinuz"
mv "$out/initrd.img.tmp" "$out/initrd.img"
mv "$out/root.img.tmp" "$out/root.img"
echo "vm disk: $out ($(du -sh --apparent-size "$root" | cut -f1) of files)" >&2
