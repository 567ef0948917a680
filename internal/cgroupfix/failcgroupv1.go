package cgroupfix

// The kubelet's version, as the node image records it, and whether that
// kubelet refuses cgroup v1 (kind PR #4077).

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// VersionFile is where kind's node images record the Kubernetes version
// they were built with ("v1.35.0"), written by `kind build node-image`.
// It is read rather than asking the kubelet binary (`kubelet --version`):
// before init nothing of the node runs yet, starting a 100 MB binary is
// slow on a loaded host and may fail on one without what it needs, and a
// dry run starts no program of the image it does not have to. The file is
// the image's own statement, the same for every node of it.
const VersionFile = "/kind/version"

// FailCgroupV1Minor is the first Kubernetes 1.x minor whose kubelet refuses
// to start on cgroup v1 by default: its failCgroupV1 setting defaults to
// true since 1.35 (KEP-5573).
const FailCgroupV1Minor = 35

// maxVersionNumber bounds each number of a version: a Kubernetes version
// has small ones, and a longer run of digits is garbage, not a version.
const maxVersionNumber = 6

// KubeletVersion is the Kubernetes version of the node image.
type KubeletVersion struct {
	// Raw is the version as VersionFile holds it, without its newline.
	Raw                 string
	Major, Minor, Patch int
}

// RefusesV1: a kubelet of this version refuses cgroup v1 unless its
// configuration sets failCgroupV1: false.
func (v KubeletVersion) RefusesV1() bool {
	return v.Major > 1 || (v.Major == 1 && v.Minor >= FailCgroupV1Minor)
}

// ReadKubeletVersion reads and parses VersionFile.
func ReadKubeletVersion(sys system.System) (KubeletVersion, error) {
	b, err := sys.ReadFile(VersionFile, system.LimitValue)
	if err != nil {
		return KubeletVersion{}, err
	}
	v, err := ParseKubeletVersion(string(b))
	if err != nil {
		return KubeletVersion{}, fmt.Errorf("%s: %w", VersionFile, err)
	}
	return v, nil
}

// ParseKubeletVersion parses a Kubernetes version as Kubernetes' builds
// name it: "v" (optional), MAJOR.MINOR.PATCH, then an optional pre-release
// ("-alpha.1...") and build ("+abcdef"). One trailing newline is allowed;
// anything else is an error that quotes, clipped, what was there.
func ParseKubeletVersion(s string) (KubeletVersion, error) {
	raw := strings.TrimSuffix(s, "\n")
	bad := func(why string) (KubeletVersion, error) {
		return KubeletVersion{}, fmt.Errorf("%s is not a Kubernetes version (vMAJOR.MINOR.PATCH): %s", logline.QuoteClipped(raw), why)
	}
	core := strings.TrimPrefix(raw, "v")
	if i := strings.IndexAny(core, "-+"); i >= 0 {
		if strings.TrimLeft(core[i+1:], digits+letters+".+-") != "" {
			return bad("a character outside [0-9A-Za-z.+-] after the version")
		}
		if i+1 == len(core) {
			return bad("nothing after " + string(core[i]))
		}
		core = core[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return bad(strconv.Itoa(len(parts)) + " numbers, not 3")
	}
	var n [3]int
	for i, p := range parts {
		v, err := versionNumber(p)
		if err != nil {
			return bad(err.Error())
		}
		n[i] = v
	}
	return KubeletVersion{Raw: raw, Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

func versionNumber(p string) (int, error) {
	switch {
	case strings.TrimLeft(p, digits) != "":
		return 0, errors.New("a number with a character that is not a digit")
	case p == "":
		return 0, errors.New("an empty number")
	case len(p) > maxVersionNumber:
		return 0, fmt.Errorf("a number of more than %d digits", maxVersionNumber)
	case len(p) > 1 && p[0] == '0':
		return 0, errors.New("a number with a leading zero")
	}
	return strconv.Atoi(p)
}

const (
	digits  = "0123456789"
	letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

// RefusesV1Warning is fix_cgroup's line, right after DetectedV1, on a
// cgroup v1 host whose node image's kubelet refuses cgroup v1: without it
// the kubelet fails minutes later and kind reports only its timeout.
func RefusesV1Warning(v KubeletVersion) (plan.Action, bool) {
	if !v.RefusesV1() {
		return plan.Action{}, false
	}
	return plan.Warning(fmt.Sprintf("the kubelet of this image (%s, from %s) refuses cgroup v1: failCgroupV1 defaults to true since Kubernetes 1.%d; "+
		"boot the host with cgroup v2, use a node image older than 1.%d, or set failCgroupV1: false in the kubelet's configuration",
		v.Raw, VersionFile, FailCgroupV1Minor, FailCgroupV1Minor)), true
}
