#!/usr/bin/env bash
# The machine's commands the unit tier's tests start (make unit runs this
# first): the privileged tests of internal/etcdpeers run iptables-legacy and
# iptables-nft (save and restore) in namespaces of their own, and those of
# internal/network nft and ip (Docker 29's native DNS redirect); ip also
# shows the network namespaces that podnet's and cmd's check tests compare
# before and after (nstest.Network). A new machine may have none of them
# until a later tier installs Docker, which pulls iptables in;
# `make test` runs the unit tier first, so it installs them itself. As root
# only: elsewhere the tests that need them fail and say which is missing.
set -o errexit -o nounset -o pipefail
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
tier_name=unit
export DEBIAN_FRONTEND=noninteractive

missing=()
for cmd in iptables-legacy-save iptables-legacy-restore iptables-nft-save iptables-nft-restore; do
  command -v "$cmd" > /dev/null || { missing=(iptables) && break; }
done
command -v nft > /dev/null || missing+=(nftables)
command -v ip > /dev/null || missing+=(iproute2)
(( ${#missing[@]} )) || exit 0
if [[ $(id -u) != 0 ]]; then
  log "WARN: not root: ${missing[*]} not installed; the privileged tests that start it fail"
  exit 0
fi
log_dir=/var/log/kind-entrypoint-unit
mkdir -p "$log_dir"
apt_install "$log_dir/apt.log" "${missing[@]}"
