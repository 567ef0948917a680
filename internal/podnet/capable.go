package podnet

// This file holds who may run a preflight: root with the capabilities it
// needs.

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Capable reports whether this process may run a preflight: root, with
// CAP_NET_ADMIN (links, routes) and CAP_SYS_ADMIN (a network namespace,
// setns) in its effective set. status is /proc/self/status.
func Capable(euid int, status []byte) bool {
	if euid != 0 {
		return false
	}
	eff, ok := effectiveCaps(status)
	return ok && eff&(1<<unix.CAP_NET_ADMIN) != 0 && eff&(1<<unix.CAP_SYS_ADMIN) != 0
}

// effectiveCaps reads the CapEff line of /proc/PID/status.
func effectiveCaps(status []byte) (uint64, bool) {
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return caps, err == nil
		}
	}
	return 0, false
}
