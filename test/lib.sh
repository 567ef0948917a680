# shellcheck shell=bash
# Shared by the tiers' run.sh scripts: source it, then call tier_init.
# It only defines functions and sets no option; each script keeps its own
# `set -o errexit -o nounset -o pipefail`.

# tier_init NAME [STATE_DIR]: the start of a tier's run. Log lines are
# prefixed with NAME; the tier must run as root and find Go (at
# /usr/local/go, as on a new machine here). Sets tier_start (now), repo (the
# repository, made the working directory), state (STATE_DIR, none for a
# tier that keeps nothing) and log_dir (/var/log/kind-entrypoint-NAME), and
# makes those directories.
tier_init() {
  tier_name=$1 state=${2:-}
  # shellcheck disable=SC2034 # read by the caller
  tier_start=$(date +%s)
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  cd "$repo" || die "cannot enter $repo"
  log_dir=/var/log/kind-entrypoint-$tier_name
  [[ $(id -u) == 0 ]] || die "must run as root (installs packages, runs container engines)"
  export DEBIAN_FRONTEND=noninteractive
  go_path
  command -v go > /dev/null || die "go not found (Go 1.26 is expected at /usr/local/go)"
  mkdir -p ${state:+"$state"} "$log_dir"
}

# go_path puts Go on PATH where a new machine here has it, /usr/local/go.
go_path() {
  [[ ! -d /usr/local/go/bin ]] || export PATH="$PATH:/usr/local/go/bin"
}

# go_build_init NAME OUT: the start of a script that builds programs from
# the Go module proxy into the directory OUT, its log lines prefixed with
# NAME: static, go.mod resolved as the build needs it, the local toolchain
# only. Sets work, a directory removed when the script exits, and makes
# OUT.tmp anew: the programs go there, and go_build_done puts them at OUT,
# so that OUT never holds half a build. The scripts that call it are part
# of a build's recipe: their callers hash this file with them.
go_build_init() {
  tier_name=$1 go_build_out=$2
  export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
  go_path
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  rm -rf "$go_build_out.tmp"
  mkdir -p "$go_build_out.tmp"
}
go_build_done() {
  rm -rf "$go_build_out"
  mv "$go_build_out.tmp" "$go_build_out"
}

# go_module_build DEST NAME MODULE@VERSION LDFLAGS TAGS PACKAGE...: after
# go_build_init, in a module of our own ($work/NAME) that requires MODULE at
# VERSION, go build its PACKAGEs (full import paths) into DEST, stripped.
go_module_build() {
  local dest=$1 dir=$work/$2 mod=${3%@*} ver=${3#*@} ldflags=$4 tags=$5 t
  shift 5
  mkdir -p "$dir" "$dest"
  printf 'module kind-entrypoint.test/%s-%s\ngo 1.26\nrequire %s %s\n' "$tier_name" "${dir##*/}" "$mod" "$ver" > "$dir/go.mod"
  t=$(date +%s)
  (cd "$dir" && go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$dest/" "$@")
  log "$mod $ver built in $(since "$t")"
}

log() { printf '%s %s: %s\n' "$(date +%T)" "${tier_name:-tier}" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
# since START: seconds from START (a `date +%s`) to now, as "Ns".
since() { echo "$(($(date +%s) - $1))s"; }

# start_daemon LOG CMD...: start CMD in the background ($! is its pid), its
# output appended to LOG, with no descriptor open but 0-2. A daemon that
# outlives the run must hold no lock: neither ours (descriptor 9) nor one a
# caller took around the whole run (`flock FILE make e2e` leaves the lock
# on some other descriptor), or every later run waits for it forever.
start_daemon() {
  local log=$1
  shift
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      if ((fd > 2)); then { exec {fd}>&-; } 2> /dev/null || true; fi
    done
    exec "$@" >> "$log" 2>&1 < /dev/null
  ) &
}

# tier_lock FILE [SECONDS]: hold FILE's lock on descriptor 9 for the rest of
# the script (a child that must not hold it gets `9>&-`). One run at a time:
# two would fight over the engine's daemon, image tags and leftovers.
tier_lock() {
  local file=$1 wait=${2:-1800}
  exec 9> "$file"
  flock -w "$wait" 9 || die "another run still holds $file after ${wait}s"
}

# apt_install LOG PACKAGE...: install the packages with Debian's apt, its
# output in LOG. DPkg::Lock::Timeout: another job's apt may hold the dpkg
# lock for a while.
apt_install() {
  local apt_log=$1 t
  shift
  (($#)) || return 0
  t=$(date +%s)
  log "installing $*"
  apt-get -o DPkg::Lock::Timeout=600 update -q > "$apt_log" 2>&1 \
    || { tail -n 20 "$apt_log" >&2; die "apt-get update failed"; }
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "$@" >> "$apt_log" 2>&1 \
    || { tail -n 20 "$apt_log" >&2; die "apt-get install failed"; }
  log "packages installed in $(since "$t")"
}

# capabilities_short: true when this machine's capability bounding set lacks
# a capability the kernel knows, so that an engine's --privileged container
# cannot be given it (ENV.md: CAP_SYS_RESOURCE here). Sets cap_missing_mask.
capabilities_short() {
  local cap_last full bounding
  cap_last=$(cat /proc/sys/kernel/cap_last_cap)
  full=$(((1 << (cap_last + 1)) - 1))
  bounding=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
  # shellcheck disable=SC2034 # read by the caller
  cap_missing_mask=$(printf '%#x' $((full & ~bounding)))
  (((bounding & full) != full))
}

# build_runtime_shim PATH: the OCI runtime wrapper (test/e2e/runtimeshim)
# that drops what this machine cannot grant, built to PATH; PATH is replaced
# only when the build differs, so a running engine keeps a stable binary.
build_runtime_shim() {
  local shim=$1
  mkdir -p "$(dirname "$shim")"
  go build -trimpath -o "$shim.new" ./test/e2e/runtimeshim
  if cmp -s "$shim.new" "$shim"; then rm "$shim.new"; else mv "$shim.new" "$shim"; fi
}

# module_dir MODULE@VERSION: the directory of that Go module in the module
# cache, downloaded from the module proxy when missing (kind's node image
# files, Kubernetes' sources). Empty output and status 1 when it cannot be had.
module_dir() {
  local dir
  dir=$(go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n $dir ]] && printf '%s\n' "$dir"
}
