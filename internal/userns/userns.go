package userns

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

const uidMapPath = "/proc/self/uid_map"

// MinNofile is the hard RLIMIT_NOFILE below which a rootless node is warned
// about: the kubelet and containerd open many files.
const MinNofile = 64000

// Required are the cgroup v2 controllers a rootless node needs delegated.
var Required = []string{"cpu", "memory", "pids"}

// InUserNS reports whether this process runs in a user namespace: anything
// but the initial namespace's single full mapping "0 0 4294967295".
func InUserNS(sys system.System) (bool, error) {
	b, err := system.ReadOptional(sys, uidMapPath, system.LimitConfig)
	if err != nil {
		return false, err
	}
	if b == nil {
		// A kernel without user namespaces has no uid_map.
		return false, nil
	}
	full, err := ParseUIDMap(b)
	if err != nil {
		return false, fmt.Errorf("%s: %w", uidMapPath, err)
	}
	return !full, nil
}

// ParseUIDMap reports whether a uid_map is the initial namespace's identity
// mapping of every uid.
func ParseUIDMap(b []byte) (full bool, err error) {
	lines := 0 // lines with a mapping
	var first [3]uint64
	i := 0
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		i++
		var f [3][]byte
		n := 0
		for field := range bytes.FieldsSeq(line) {
			if n < len(f) {
				f[n] = field
			}
			n++
		}
		if n == 0 {
			continue
		}
		if n != 3 {
			return false, fmt.Errorf("line %d: want 3 fields, got %d", i, n)
		}
		var v [3]uint64
		for j, s := range f {
			u, err := strconv.ParseUint(string(s), 10, 32)
			if err != nil {
				return false, fmt.Errorf("line %d: field %d: %w", i, j+1, clipNumError(err))
			}
			v[j] = u
		}
		if lines == 0 {
			first = v
		}
		lines++
	}
	if lines == 0 {
		// An unwritten map: a new user namespace before its mapping is set.
		return false, nil
	}
	return lines == 1 && first == [3]uint64{0, 0, 4294967295}, nil
}

// clipNumError is err, a strconv error, quoting at most a clip of its
// input (strconv quotes the whole field, which may be a megabyte).
func clipNumError(err error) error {
	var ne *strconv.NumError
	if !errors.As(err, &ne) || len(ne.Num) <= 80 {
		return err
	}
	return fmt.Errorf("strconv.%s: parsing %s: %w", ne.Func, logline.QuoteClipped(ne.Num), ne.Err)
}

// Facts is what validate_userns checks.
type Facts struct {
	NofileHard uint64
	CgroupV2   bool
	// Controllers is the content of /sys/fs/cgroup/cgroup.controllers (v2).
	Controllers string
}

// Detect reads the facts; call it only in a user namespace. controllers
// reads /sys/fs/cgroup/cgroup.controllers (cgroupfix.ReadControllers); it
// is nil on cgroup v1.
func Detect(sys system.System, controllers func() (string, error)) (Facts, error) {
	n, err := sys.NofileHard()
	if err != nil {
		return Facts{}, err
	}
	f := Facts{NofileHard: n, CgroupV2: controllers != nil}
	if f.CgroupV2 {
		if f.Controllers, err = controllers(); err != nil {
			return Facts{}, err
		}
	}
	return f, nil
}

// Plan logs the user namespace and its warnings; missing controllers are
// fatal, all of them named in one error.
func Plan(f Facts) ([]plan.Action, error) {
	actions := []plan.Action{plan.Info("running in a user namespace (experimental)")}
	if f.NofileHard < MinNofile {
		actions = append(actions, plan.Warning(fmt.Sprintf(
			"UserNS: expected RLIMIT_NOFILE to be at least %d, got %d", MinNofile, f.NofileHard)))
	}
	if !f.CgroupV2 {
		return actions, nil
	}
	return actions, MissingError(Missing(f.Controllers))
}

// Missing lists the Required controllers absent from a cgroup.controllers
// line (whole words only: "cpuset" does not provide "cpu").
func Missing(controllers string) []string {
	have := strings.Fields(controllers)
	var missing []string
	for _, c := range Required {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	return missing
}

// MissingError is the error for undelegated controllers, in the reference's
// words when one is missing; nil when none is.
func MissingError(missing []string) error {
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("UserNS: %s controller needs to be delegated", missing[0])
	}
	return fmt.Errorf("UserNS: %s and %s controllers need to be delegated",
		strings.Join(missing[:len(missing)-1], ", "), missing[len(missing)-1])
}
