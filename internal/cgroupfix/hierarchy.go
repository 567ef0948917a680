package cgroupfix

import (
	"bufio"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/containerd/cgroups/v3"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// What every command knows of the node's cgroups, in one place: where the
// hierarchies are mounted, and the two files read to tell which ones the
// node has (see doc.go for why not the cgroups library's Mode()).
const (
	// Root is where the cgroup hierarchies are mounted: the unified one
	// itself on v2, a tmpfs of v1 hierarchies on v1.
	Root = "/sys/fs/cgroup"
	// ControllersFile lists the controllers of the unified hierarchy's
	// root; only cgroup v2 has it.
	ControllersFile = Root + "/cgroup.controllers"
	// ProcSelfCgroup names this process's cgroup in each hierarchy.
	ProcSelfCgroup = "/proc/self/cgroup"
)

// ReadControllers is ControllersFile, without the surrounding space.
func ReadControllers(sys system.System) (string, error) {
	b, err := sys.ReadFile(ControllersFile, system.LimitValue)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// SelfCgroup is /proc/self/cgroup as read; its lines are parsed by
// containerd's cgroups library (ParseCgroupFromReaderUnified) when asked.
type SelfCgroup string

// ReadSelfCgroup reads /proc/self/cgroup.
func ReadSelfCgroup(sys system.System) (SelfCgroup, error) {
	b, err := sys.ReadFile(ProcSelfCgroup, system.LimitConfig)
	if err != nil {
		return "", err
	}
	return SelfCgroup(b), nil
}

// errNoCPU: no line names the cpu controller.
var errNoCPU = errors.New("no cpu controller")

// each parses the file a line at a time with the library, so that an
// error names its line (the library's quotes the text only), and calls fn
// with each line's v1 controllers and unified path until fn returns
// false. A blank line is skipped; a line's CR before its newline is not
// part of its path (the library's line scanner drops it).
func (s SelfCgroup) each(fn func(line int, v1 map[string]string, unified string) bool) error {
	n := 0
	for line := range strings.SplitSeq(string(s), "\n") {
		n++
		if strings.TrimSuffix(line, "\r") == "" {
			continue
		}
		if len(line) >= bufio.MaxScanTokenSize {
			return fmt.Errorf("line %d: longer than %d bytes", n, bufio.MaxScanTokenSize-1)
		}
		v1, unified, err := cgroups.ParseCgroupFromReaderUnified(strings.NewReader(line))
		if err != nil {
			// The library's own words quote the whole line, which
			// may be kilobytes of garbage.
			return fmt.Errorf("line %d: want id:controllers:path", n)
		}
		if !fn(n, v1, unified) {
			return nil
		}
	}
	return nil
}

// CPU is the cgroup path of the cpu controller ("4:cpu,cpuacct:/docker/abc"
// -> "/docker/abc"): the container's cgroup on v1. Lines after the first
// that names cpu are not read.
func (s SelfCgroup) CPU() (string, error) {
	var p string
	line := 0
	err := s.each(func(n int, v1 map[string]string, _ string) bool {
		cpu, ok := v1["cpu"]
		if ok {
			p, line = cpu, n
		}
		return !ok
	})
	switch {
	case err != nil:
		return "", err
	case line == 0:
		return "", errNoCPU
	case !strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("line %d: cgroup path %s is not absolute", line, logline.QuoteClipped(p))
	// "/.." is how the kernel shows a cgroup outside the namespace's
	// root: not one the node can make its own, and never a path for
	// mkdir or mount. path.Clean turns each of its forms ("/..",
	// "/../x", "/x/../y") into another path.
	case path.Clean(p) != p:
		return "", fmt.Errorf("line %d: cgroup path %s is not a clean path inside the cgroup namespace", line, logline.QuoteClipped(p))
	}
	return p, nil
}

// OnlyUnified reports whether the file lists the unified hierarchy
// ("0::PATH") and nothing else.
func (s SelfCgroup) OnlyUnified() bool {
	seen, v1 := false, false
	err := s.each(func(_ int, controllers map[string]string, _ string) bool {
		seen, v1 = true, len(controllers) > 0
		return !v1
	})
	return err == nil && seen && !v1
}

// Unified is this process's cgroup in the unified hierarchy, "" when no
// line gives one (or the file cannot be parsed).
func (s SelfCgroup) Unified() string {
	var p string
	// A line that does not parse ends the search: what came before it
	// gave no unified path either.
	_ = s.each(func(_ int, _ map[string]string, unified string) bool {
		p = unified
		return unified == ""
	})
	return p
}
