package check

// This file holds the rows about the host's kernel limits that a kind
// cluster exhausts: inotify instances and watches (kind's known issue
// "too many open files") and, rootless, the kernel key quota (kind #3806).
// None stops the entrypoint, so none has a boot line: they are warnings.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// The values kind's documentation recommends.
const (
	// MinInotifyInstances and MinInotifyWatches: kind's known issues,
	// "Pod errors due to too many open files".
	MinInotifyInstances = 512
	MinInotifyWatches   = 524288
	// MinMaxKeys: kind #3806 (rootless podman, "could not create session
	// key: disk quota exceeded"); the kernel's default is 200.
	MinMaxKeys = 20000
)

// sysctl is a numeric sysctl read from its /proc/sys file: one decimal
// number and a newline, as the kernel writes it.
type sysctl struct {
	path string
	min  uint64
	n    uint64
	err  error
}

func (c *checker) readSysctl(p string, min uint64) sysctl {
	s := sysctl{path: p, min: min}
	b, err := c.sys.ReadFile(p, system.LimitValue)
	if err == nil {
		if s.n, err = strconv.ParseUint(strings.TrimSuffix(string(b), "\n"), 10, 64); err != nil {
			err = fmt.Errorf("%s: %w", p, err)
		}
	}
	s.err = err
	return s
}

// name is the sysctl's name: kernel.keys.maxkeys for its file.
func (s sysctl) name() string {
	return strings.ReplaceAll(strings.TrimPrefix(s.path, "/proc/sys/"), "/", ".")
}

// sysctlRow is the row of limits that should each be at least their
// min: warn for those below (fix names the fix), or that cannot be read;
// a file that does not exist cannot be told (a kernel without it, or a
// replayed host captured before check read it): the row passes saying so.
func sysctlRow(name, fix string, limits ...sysctl) Row {
	var obs, low, missing []string
	for _, s := range limits {
		switch {
		case system.NotExist(s.err):
			missing = append(missing, s.path)
		case s.err != nil:
			return Row{name, Warn, "cannot be read: " + s.err.Error(), fix}
		default:
			obs = append(obs, fmt.Sprintf("%s=%d", s.name(), s.n))
			if s.n < s.min {
				low = append(low, fmt.Sprintf("%s below %d", s.name(), s.min))
			}
		}
	}
	if len(missing) > 0 {
		obs = append(obs, "not known: no "+strings.Join(missing, ", no "))
	}
	text := strings.Join(obs, "; ")
	if len(low) > 0 {
		return Row{name, Warn, text + "; " + strings.Join(low, ", "), fix}
	}
	return Row{name, Pass, text, ""}
}

// inotify: the host's inotify limits, shared by every node and pod of
// every cluster on it; clusters of several nodes exhaust the defaults
// (128 instances) and pods fail with "too many open files".
func (c *checker) inotify() Row {
	return sysctlRow("inotify",
		fmt.Sprintf("on the host: sysctl -w fs.inotify.max_user_instances=%d fs.inotify.max_user_watches=%d (and in /etc/sysctl.d/ to keep it); kind's known issues, \"too many open files\"",
			MinInotifyInstances, MinInotifyWatches),
		c.readSysctl("/proc/sys/fs/inotify/max_user_instances", MinInotifyInstances),
		c.readSysctl("/proc/sys/fs/inotify/max_user_watches", MinInotifyWatches))
}

// keys: rootless, every container's runc makes a session keyring counted
// against the host user's kernel.keys.maxkeys (root's is root_maxkeys, a
// million on most hosts).
func (c *checker) keys() Row {
	const name = "keys-maxkeys"
	if !c.st.UserNS {
		return Row{name, Pass, "not rootless: root's keys count against kernel.keys.root_maxkeys", ""}
	}
	return sysctlRow(name,
		fmt.Sprintf("rootless nodes and their pods make a keyring each, against the host user's quota (200 by default): on the host, sysctl -w kernel.keys.maxkeys=%d kernel.keys.maxbytes=500000 (kind #3806); else \"could not create session key: disk quota exceeded\"", MinMaxKeys),
		c.readSysctl("/proc/sys/kernel/keys/maxkeys", MinMaxKeys))
}
