#!/usr/bin/env bash
# VM tier: kind nodes on a cgroup v2 host, with Docker as root and rootless,
# inside a QEMU VM (what `make e2e-vm` runs). See test/vm/README.md.
#
# Two suites share this script, its disk, its boot and its results; each has
# its own node image and guest script (test/vm/guest/SUITE.sh):
#   nodes    (make e2e-vm): the e2e node image on its own;
#   cluster  (make e2e-vm-cluster, VM_SUITE=cluster): the cluster tier's node
#            image (Kubernetes), a 1-node cluster made by the kind CLI and
#            checked by the cluster tier's test, compiled for the VM.
#
#   1. installs what is missing (qemu-system-x86, qemu-utils, debootstrap,
#      e2fsprogs);
#   2. builds the node image with the e2e tier's recipe
#      (test/e2e/run.sh --build-only: one image for every tier), or for the
#      cluster suite the cluster tier's (test/cluster/run.sh --build-only),
#      and saves it with `docker save`, cached by image id;
#   3. builds the VM's root disk (test/vm/disk/build.sh), cached by a hash
#      of test/vm/disk/ and test/debootstrap.sh;
#   4. boots the VM (QEMU, TCG unless a short probe shows KVM works, no
#      network) on a throwaway overlay of that disk, with a data disk holding
#      the node image, the kind CLI (test/kind-cli.sh) and
#      test/vm/guest/scenarios.sh, which runs at boot and
#      writes its results to a results disk, then powers off. A run that
#      ends clean leaves its overlay as the "warm disk" for later runs of
#      images with the same base layer: their docker loads skip that layer;
#   5. prints one PASS/FAIL line per scenario and "N passed, N failed";
#      exits non-zero unless every scenario passed.
#
# Environment: VM_SUITE (nodes or cluster; default nodes), VM_TIMEOUT
# (seconds the VM may run, default 2400; cluster 900 + VM_CLUSTER_LIMIT a
# scenario), VM_CLUSTER_LIMIT (cluster: seconds a cluster may take, 3600),
# VM_ACCEL (auto, tcg
# or kvm; default auto), VM_CPUS (2), VM_MEMORY (MiB, 4096; cluster 6144),
# VM_TIME_SCALE (cluster: the factor on the cluster test's time limits,
# default 4), VM_CLUSTERS (cluster: the clusters to make, of "root rootless
# podman root-control podman-control root-dual", the default; see
# test/vm/guest/cluster.sh),
# VM_BOOT_LIMIT (seconds a node may take to reach `running`, default 180),
# VM_EXIT_LIMIT (seconds a failing node may take to exit, default 120),
# VM_PODMAN (0: without the rootless-podman scenario; default 1),
# VM_GUEST (the VM's Debian release, bookworm or trixie; default bookworm
# for the nodes suite, trixie for the cluster suite),
# VM_STACK (nodes: 1 runs the suite on kind v0.33.0's node stack, the
# image test/stack/run.sh --build-only builds, with that release's kind CLI
# and its script as the differential's control; guest trixie by default),
# VM_DEBIAN_MIRROR, VM_STATE_DIR (default /var/cache/kind-entrypoint-vm),
# CLUSTER_VERSIONS (cluster: the cluster tier's versions file, default
# test/cluster/versions; test/cluster/versions-stack-v2 is Kubernetes 1.37
# on kind v0.33.0's stack), VM_NODE_IMAGE (use this image instead of building the e2e one: only for
# trying a change to the image; the tier's verdict is on the e2e image).
set -o errexit -o nounset -o pipefail

# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
tier_init vm "${VM_STATE_DIR:-/var/cache/kind-entrypoint-vm}"
state=$(realpath -m "$state") # qcow2 backing paths are absolute
log_root=$log_dir # each run's logs go into a directory of their own below it
suite=${VM_SUITE:-nodes}
stack=${VM_STACK:-0}
[[ $stack == [01] ]] || die "VM_STACK=$stack: want 0 or 1"
[[ $suite == nodes || $stack == 0 ]] || die "VM_STACK is the nodes suite's (the cluster suite's stack is CLUSTER_VERSIONS')"
accel=${VM_ACCEL:-auto}
cpus=${VM_CPUS:-2}
boot_limit=${VM_BOOT_LIMIT:-180}
exit_limit=${VM_EXIT_LIMIT:-120}
# VM_PODMAN=0 leaves rootless-podman out (it alone loads the image into
# podman: minutes on a cold disk).
vm_podman=${VM_PODMAN:-1}
time_scale=${VM_TIME_SCALE:-4}
# Every scenario the guest reports, in order: a missing one is a failure.
case $suite in
  nodes)
    # the stack's nodes on the guest of today's engines, as the cluster
    # suite's
    guest=bookworm
    ((stack)) && guest=trixie
    guest=${VM_GUEST:-$guest}
    # 23 min seen with the machine loaded (load 5-12, another VM beside it)
    vm_timeout=${VM_TIMEOUT:-2400}
    cluster_limit=0
    memory=${VM_MEMORY:-4096}
    scenarios=(vm-host default-node kubelet-cgroup restart differential rootless-docker rootless-node rootless-differential)
    ((vm_podman)) && scenarios+=(rootless-podman)
    scenarios+=(rootless-no-memory)
    ;;
  cluster)
    guest=${VM_GUEST:-trixie}
    memory=${VM_MEMORY:-6144}
    clusters=${VM_CLUSTERS:-root rootless podman root-control podman-control root-dual}
    for c in $clusters; do
      case $c in
        root | root-control | root-dual | rootless | podman | podman-control) ;;
        *) printf 'vm: VM_CLUSTERS takes root, root-control, root-dual, rootless, podman and podman-control, not %s\n' "$c" >&2; exit 2 ;;
      esac
    done
    # in the order the guest runs them (test/vm/guest/cluster.sh), each
    # engine's load before its first cluster
    scenarios=(vm-host)
    for c in root rootless podman root-control podman-control root-dual; do
      [[ " $clusters " == *" $c "* ]] || continue
      case $c in
        rootless) scenarios+=(rootless-docker) ;;
        podman*) [[ " ${scenarios[*]} " == *" rootless-podman "* ]] || scenarios+=(rootless-podman) ;;
      esac
      scenarios+=("cluster-$c")
    done
    # Under emulation a cluster of Kubernetes 1.34 (kind v0.23's stack) took
    # 15-20 minutes; one of 1.37 (kind v0.33's) took 21 minutes to create
    # and 5 more to check, before its restart (2026-12-03). Each cluster
    # gets at most VM_CLUSTER_LIMIT seconds, and the VM 15 minutes for the
    # boot and the root load, then that for each scenario.
    cluster_limit=${VM_CLUSTER_LIMIT:-3600}
    vm_timeout=${VM_TIMEOUT:-$((900 + cluster_limit * (${#scenarios[@]} - 1)))}
    ;;
  *) printf 'vm: VM_SUITE must be nodes or cluster, not %s\n' "$suite" >&2; exit 2 ;;
esac
case $guest in
  bookworm | trixie) ;;
  *) printf 'vm: VM_GUEST must be bookworm or trixie, not %s\n' "$guest" >&2; exit 2 ;;
esac

tier_lock "$state/lock"

# --- 1. packages -------------------------------------------------------------
missing=()
command -v qemu-system-x86_64 > /dev/null || missing+=(qemu-system-x86)
command -v qemu-img > /dev/null || missing+=(qemu-utils)
command -v debootstrap > /dev/null || missing+=(debootstrap)
command -v mkfs.ext4 > /dev/null || missing+=(e2fsprogs)
apt_install "$log_root/apt.log" "${missing[@]}"

# --- 2. the node image -------------------------------------------------------
t=$(date +%s)
# the cluster suite's control image: kind's script on the same image
reference_image=
if [[ -n ${VM_NODE_IMAGE:-} ]]; then
  node_image=$VM_NODE_IMAGE
  log "using VM_NODE_IMAGE=$node_image, not the e2e node image"
else
  # 9>&-: the e2e run must not inherit our lock
  case $suite in
    nodes)
      if ((stack)); then
        node_image=$(bash test/stack/run.sh --build-only 9>&-) || die "building the stack's node image (test/stack/run.sh --build-only) failed"
      else
        node_image=$(bash test/e2e/run.sh --build-only 9>&-) || die "building the node image (test/e2e/run.sh --build-only) failed"
      fi
      ;;
    cluster)
      # it prints the cluster image first, then its control images
      images=$(bash test/cluster/run.sh --build-only 9>&-) || die "building the cluster node image (test/cluster/run.sh --build-only) failed"
      node_image=$(sed -n 1p <<< "$images")
      reference_image=$(sed -n 2p <<< "$images")
      ;;
  esac
fi
image_id=$(docker image inspect -f '{{.Id}}' "$node_image") || die "no image $node_image"
image_id=${image_id#sha256:}
reference_id=
if [[ -n $reference_image ]]; then
  reference_id=$(docker image inspect -f '{{.Id}}' "$reference_image") || die "no image $reference_image"
  reference_id=${reference_id#sha256:}
fi
# one archive of both images: their shared layers are in it once
node_tar=$state/node-${image_id:0:12}${reference_id:+-${reference_id:0:12}}.tar
if [[ ! -s $node_tar ]]; then
  docker save -o "$node_tar.tmp" "$node_image" $reference_image
  chmod 0644 "$node_tar.tmp"
  mv "$node_tar.tmp" "$node_tar"
  find "$state" -maxdepth 1 -name 'node-*.tar' ! -path "$node_tar" -delete
fi
log "node image $node_image (${image_id:0:12})${reference_image:+ and control image $reference_image (${reference_id:0:12})} ready in $(since "$t")"
# The kind CLI (static: it runs in the VM): v0.23.0 for the nodes suite's
# rootless-podman scenario (with VM_STACK, the stack's release,
# test/stack/versions' KIND, whose script is then the differential's
# control); for the cluster suite the release made for the image's
# Kubernetes (CLUSTER_VERSIONS' KIND), and the cluster tier's test, built for
# the VM.
kind_version=v0.23.0
if [[ $suite == cluster ]]; then
  kind_version=$(sed -n 's/^KIND=//p' "${CLUSTER_VERSIONS:-test/cluster/versions}")
elif ((stack)); then
  kind_version=$(sed -n 's/^KIND=//p' test/stack/versions)
fi
kind_cli=$(bash test/kind-cli.sh "$kind_version") || die "building the kind CLI $kind_version (test/kind-cli.sh) failed"

# --- 3. the VM disk ----------------------------------------------------------
# test/debootstrap.sh: build.sh sources it. One disk per guest release is
# kept (each suite's runs keep finding theirs).
disk_hash=$( (cd test/vm/disk && find . -type f -print0 | sort -z | xargs -0 sha256sum) \
  | cat - test/debootstrap.sh | sha256sum | cut -c1-12)
disk=$state/disk-$guest-$disk_hash
t=$(date +%s)
if [[ -s $disk/root.img ]]; then
  log "VM disk $disk present"
else
  log "building VM disk $disk (debootstrap of $guest: a few minutes)"
  bash test/vm/disk/build.sh "$disk" test/vm/disk "$state" "$guest"
  # this release's older disks, and those from before the release was in
  # the name (disk-HASH)
  find "$state" -maxdepth 1 \( -name "disk-$guest-*" -o -regex '.*/disk-[0-9a-f]*' \) ! -path "$disk" -exec rm -rf {} +
fi
log "VM disk ready in $(since "$t")"

# --- 4. boot -----------------------------------------------------------------
run=$log_root/run-$(date +%Y%m%d-%H%M%S)
work=$state/run
rm -rf "$work"
mkdir -p "$run/results" "$work/in"
# Keep the last 10 runs' logs.
find "$log_root" -maxdepth 1 -name 'run-*' | sort | head -n -10 | xargs -r rm -rf
qemu_pid=
cleanup() {
  [[ -n $qemu_pid ]] && kill "$qemu_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The warm disk: the VM's disk after a clean run, with the node image
# loaded in both daemons and nothing else left; valid for images that share
# its base layer (the big one: loading it takes minutes under emulation).
base_layer=$(docker image inspect -f '{{index .RootFS.Layers 0}}' "$node_image")
base_layer=${base_layer#sha256:}
# One per suite: each holds its own image. The nodes suite's is good for any
# image on the same base layer (its own layers are small); the cluster
# suite's only for the same image: its big layers (the component images,
# Kubernetes) are its own, and loading them takes minutes.
warm_prefix=warm- warm_key=$base_layer
[[ $suite == nodes ]] || warm_prefix=warm-$suite- warm_key=$image_id
warm=$disk/$warm_prefix${warm_key:0:12}.qcow2
t=$(date +%s)
if [[ -s $warm ]]; then
  log "booting from the warm disk $warm"
  qemu-img create -q -f qcow2 -b "$warm" -F qcow2 "$work/root.qcow2"
else
  qemu-img create -q -f qcow2 -b "$disk/root.img" -F raw "$work/root.qcow2"
fi
ln "$node_tar" "$work/in/node.tar" 2> /dev/null || cp "$node_tar" "$work/in/node.tar"
cp test/vm/guest/scenarios.sh "test/vm/guest/$suite.sh" "$work/in/"
if [[ $suite == nodes ]]; then
  # The suite's checks are test/e2e's: the VM's node tests (TestVM*, tag
  # vm) and the differential tier (TestDifferential), which runs from a copy
  # of the paths it reads, against the scripts of kind $kind_version (v0.23.0,
  # or the stack's) out of kind's Go module. The guest runs them from this
  # compiled test binary.
  CGO_ENABLED=0 go test -c -tags e2e,vm -trimpath -o "$work/in/e2e.test" ./test/e2e \
    || die "building the e2e test binary failed"
  mkdir -p "$work/in/repo/test/e2e/testdata" "$work/in/repo/docs"
  cp docs/differences.md "$work/in/repo/docs/"
  cp test/e2e/testdata/differential-normalize.txt "$work/in/repo/test/e2e/testdata/"
  kind_mod=$(module_dir "sigs.k8s.io/kind@$kind_version") || die "go mod download sigs.k8s.io/kind@$kind_version failed"
  for f in usr/local/bin/entrypoint kind/bin/create-kubelet-cgroup-v2.sh; do
    install -D -m 0755 "$kind_mod/images/base/files/$f" "$work/in/kind-reference/images/base/files/$f"
  done
fi
cp "$kind_cli" "$work/in/kind"
if [[ $suite == cluster ]]; then
  CGO_ENABLED=0 go test -c -tags cluster,vm,matrix -trimpath -o "$work/in/cluster.test" ./test/cluster/ \
    || die "building the cluster test for the VM failed"
fi
printf 'SUITE=%q\nNODE_IMAGE=%q\nNODE_IMAGE_ID=%q\nREFERENCE_IMAGE=%q\nREFERENCE_IMAGE_ID=%q\nBOOT_LIMIT=%d\nEXIT_LIMIT=%d\nPODMAN=%d\nTIME_SCALE=%d\nVM_TIMEOUT=%d\nCLUSTERS=%q\nCLUSTER_LIMIT=%d\nKIND_VERSION=%q\n' \
  "$suite" "$node_image" "$image_id" "$reference_image" "$reference_id" "$boot_limit" "$exit_limit" "$vm_podman" "$time_scale" "$vm_timeout" "${clusters:-}" "$cluster_limit" "$kind_version" > "$work/in/vm.env"
in_mib=$(( $(du -sm "$work/in" | cut -f1) + 64 ))
truncate -s "${in_mib}M" "$work/in.img"
mkfs.ext4 -q -F -L kindvm-in -d "$work/in" "$work/in.img"
truncate -s 256M "$work/out.img"
log "data disks ready in $(since "$t")"

# kvm_works boots the kernel (no root disk: it panics and QEMU exits) with
# KVM and looks for its banner. KVM guests hung before the kernel's first
# line on the development machines (nested virtualisation), or QEMU
# aborted, so KVM is used only where this probe of at most 10 s succeeds.
kvm_works() {
  [[ -r /dev/kvm && -w /dev/kvm ]] || return 1
  (timeout 10 qemu-system-x86_64 -accel kvm -cpu max -m 256 -display none -nic none -no-reboot \
    -kernel "$disk/vmlinuz" -append "console=ttyS0 panic=-1" \
    -serial "file:$run/kvm-probe.log" -monitor none < /dev/null || true) > /dev/null 2>&1
  grep -q 'Linux version' "$run/kvm-probe.log" 2> /dev/null
}
case $accel in
  auto) if kvm_works; then accel=kvm; else accel=tcg; fi ;;
  tcg | kvm) ;;
  *) die "VM_ACCEL must be auto, tcg or kvm, not $accel" ;;
esac

cmdline="root=LABEL=kindvm-root rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 panic=1 quiet"
log "booting the VM, suite $suite ($accel, $cpus CPUs, ${memory} MiB, limit ${vm_timeout}s); logs: $run"
t=$(date +%s)
# -uuid: real machines have a DMI product_uuid, which the node must hide.
timeout --kill-after=10 "$vm_timeout" qemu-system-x86_64 \
  -accel "$accel" -cpu max -smp "$cpus" -m "$memory" \
  -display none -nic none -no-reboot -uuid "$(cat /proc/sys/kernel/random/uuid)" \
  -kernel "$disk/vmlinuz" -initrd "$disk/initrd.img" -append "$cmdline" \
  -drive "file=$work/root.qcow2,if=none,id=root,format=qcow2" -device virtio-blk-pci,drive=root,serial=kindvm-root \
  -drive "file=$work/in.img,if=none,id=in,format=raw,readonly=on" -device virtio-blk-pci,drive=in,serial=kindvm-in \
  -drive "file=$work/out.img,if=none,id=out,format=raw" -device virtio-blk-pci,drive=out,serial=kindvm-out \
  -serial "file:$run/serial.log" -monitor none < /dev/null > "$run/qemu.log" 2>&1 &
qemu_pid=$!
# Progress: the guest's "vm-tier:" lines as they reach the serial log.
tail -n +1 -F --pid="$qemu_pid" "$run/serial.log" 2> /dev/null \
  | sed -un 's/.*vm-tier: /  guest: /p' >&2 &
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=
vm_took=$(since "$t")
wait
case $qemu_rc in
  0) log "the VM powered off after $vm_took" ;;
  124 | 137) log "ERROR: the VM was killed after ${vm_timeout}s (VM_TIMEOUT)" ;;
  *) log "ERROR: QEMU exited with $qemu_rc after $vm_took: $(tail -n 3 "$run/qemu.log")" ;;
esac

# --- 5. results ----------------------------------------------------------------
tar -xf "$work/out.img" -C "$run/results" 2> "$run/results-tar.log" || log "results disk unreadable: $(cat "$run/results-tar.log")"
summary=$run/results/summary
passed=0 failed=0
for s in "${scenarios[@]}"; do
  line=$(grep -E "^(PASS|FAIL): $s " "$summary" 2> /dev/null | head -n 1) || true
  [[ -n $line ]] || line="FAIL: $s: no result (the guest stopped before it)"
  echo "$line"
  if [[ $line == PASS:* ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
if ! grep -qx "done" "$summary" 2> /dev/null; then
  echo "FAIL: guest: the scenario script did not finish (see $run/serial.log)"
  failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
if [[ ! -s $warm ]] && grep -qx "clean" "$summary" 2> /dev/null; then
  # this suite's earlier warm disks (12 hex digits: not another suite's)
  find "$disk" -maxdepth 1 -name "$warm_prefix????????????.qcow2" -delete
  mv "$work/root.qcow2" "$warm"
  log "kept the VM's disk as $warm for later runs"
fi
log "whole tier $(since "$tier_start") (VM $vm_took)"
if ((failed)); then
  log "logs: $run (serial.log; results/<scenario>/ has each node's docker logs, failed units, journal)"
  exit 1
fi
