# Shell functions the tiers' run.sh scripts share; source it from the
# repository's root (`source test/tier/lib.sh`). Each expects the caller's
# die().

# missing_caps prints the mask of the capabilities the kernel has and this
# process's bounding set lacks (0x0 when none): where it is not 0, runc
# cannot grant --privileged's full set, and the tiers run it through the
# wrapper test/e2e/runtimeshim.
missing_caps() {
  local cap_last full bounding
  cap_last=$(cat /proc/sys/kernel/cap_last_cap)
  full=$(( (1 << (cap_last + 1)) - 1 ))
  bounding=$(( 16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status) ))
  printf '%#x\n' $(( full & ~bounding ))
}

# require_own_binary NAME ID: image ID (tagged NAME) must hold this
# checkout's bin/entrypoint. Image tags are shared by every checkout on the
# machine: another run may have rebuilt one since.
require_own_binary() {
  local probe sum
  probe=$(docker create "$2" /bin/true) || die "docker create $1 failed"
  sum=$(docker cp "$probe:/usr/local/bin/entrypoint" - | tar -xO | sha256sum | cut -d' ' -f1)
  docker rm "$probe" > /dev/null
  [[ $sum == $(sha256sum < bin/entrypoint | cut -d' ' -f1) ]] \
    || die "$1 ($2) holds another entrypoint than bin/entrypoint: another checkout rebuilt the tag; rerun"
}
