#!/usr/bin/env bash
# What enable_network_magic's iptables-nft-restore costs in a node, and why:
# in a privileged container of the node image on a user-defined network
# (so Docker has written its embedded-DNS rules), N times each:
#   full      iptables-nft-restore of the nat table with the rules rewritten
#             as the entrypoint rewrites them (what a boot does);
#   add-only  iptables-nft-restore --noflush of just the rules (nothing is
#             deleted);
#   chains    iptables-nft-restore --noflush that flushes and refills only
#             the chains the rewrite changes;
# each from Docker's original rules, printing the median wall time and the
# CPU (user+sys) of the last run. In an image with strace (IMAGE=
# kind-entrypoint-bench/strace:dev, which make bench builds) it also times,
# three times, the full restore's commit against the close of its netfilter
# socket. The restore numbers of docs/performance.md come from this.
#
# usage: bench/nft-restore.sh   (env N=15, IMAGE: default the node image of
# test/e2e/run.sh --build-only); needs root and Docker.
set -o errexit -o nounset -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
image=${IMAGE:-$(bash test/e2e/run.sh --build-only)}
net=kind-ep-nft-restore name=kind-ep-nft-restore
docker network create "$net" > /dev/null
trap 'docker rm -f "$name" > /dev/null 2>&1; docker network rm "$net" > /dev/null 2>&1' EXIT
docker run -d --name "$name" --network "$net" --privileged --entrypoint sleep "$image" 600 > /dev/null
gw=$(docker network inspect -f '{{(index .IPAM.Config 0).Gateway}}' "$net")

docker exec -i -e N="${N:-15}" -e GW="$gw" "$name" bash -s << 'IN'
set -eu
iptables-nft-save -t nat > /tmp/orig
sed -e "s/-d 127.0.0.11/-d $GW/g" -e "s/--to-source :53/--to-source $GW:53/g" /tmp/orig > /tmp/full
{ echo '*nat'; grep '^-A' /tmp/full; echo COMMIT; } > /tmp/add
{
  echo '*nat'
  for c in OUTPUT POSTROUTING DOCKER_OUTPUT DOCKER_POSTROUTING; do
    echo "-F $c"
    grep "^-A $c " /tmp/full || true
  done
  echo COMMIT
} > /tmp/chains
measure() { # label, flush-before, restore args...
  local label=$1 flush=$2; shift 2
  local times=() i s e
  for ((i = 0; i < N; i++)); do
    iptables-nft-restore /tmp/orig
    [[ $flush == flush ]] && printf '*nat\n-F\nCOMMIT\n' | iptables-nft-restore --noflush
    s=$(date +%s%N)
    iptables-nft-restore "$@"
    e=$(date +%s%N)
    times+=($(((e - s) / 1000)))
  done
  local median
  median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$((N / 2 + 1))p")
  TIMEFORMAT='%R s wall, %U s user, %S s sys'
  local cpu
  iptables-nft-restore /tmp/orig
  [[ $flush == flush ]] && printf '*nat\n-F\nCOMMIT\n' | iptables-nft-restore --noflush
  cpu=$({ time iptables-nft-restore "$@"; } 2>&1)
  printf '%-9s median %6.1f ms over %d runs; last run %s\n' "$label" "$(awk "BEGIN{print $median/1000}")" "$N" "$cpu"
}
measure full keep /tmp/full
measure add-only flush --noflush /tmp/add
measure chains keep --noflush /tmp/chains
# Where the full restore's wall time goes, when the image has strace: the
# commit (the one sendmsg of the batch) against closing the netfilter
# socket afterwards, which waits for the deleted rules' RCU grace period.
if command -v strace > /dev/null; then
  for ((i = 0; i < 3; i++)); do
    iptables-nft-restore /tmp/orig
    strace -T -e trace=sendmsg,close -o /tmp/strace iptables-nft-restore /tmp/full
    commit=$(grep 'NFNL_MSG_BATCH_BEGIN' /tmp/strace | sed -n 's/.*<\([0-9.]*\)>$/\1/p' | tail -n 1)
    slowest=$(grep '^close(' /tmp/strace | sed -n 's/.*<\([0-9.]*\)>$/\1/p' | sort -n | tail -n 1)
    awk -v c="$commit" -v s="$slowest" 'BEGIN { printf "full, under strace: commit (sendmsg) %.2f ms, slowest close %.2f ms\n", c * 1000, s * 1000 }'
  done
fi
IN
