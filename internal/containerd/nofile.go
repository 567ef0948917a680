package containerd

// containerd.service's open-file limit, which containerd hands down to
// every container of the node (kind #4244).

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

const (
	// Unit is containerd's systemd unit in kind's node image.
	Unit = "containerd.service"
	// maxDropIns bounds the drop-ins read from one directory: kind's
	// image has none.
	maxDropIns = 64
)

// Nofile is the LimitNOFILE= systemd would give containerd.service: its
// unit file as systemd picks it (the first of unitDirs), then the drop-ins
// of every unit directory, by file name (one in an earlier directory
// hiding one of the same name in a later), the last assignment winning.
type Nofile struct {
	// UnitPath is the unit file read; "" when there is none.
	UnitPath string
	// Value is the last LimitNOFILE= ("" when none, or an empty one
	// reset it: systemd's default), and From the file that set it.
	Value, From string
}

// Infinite: the hard limit is infinity, which systemd resolves to
// fs.nr_open when containerd starts.
func (n Nofile) Infinite() bool { return n.hard() == "infinity" }

// hard is the hard limit of Value: "SOFT:HARD", or one value for both.
func (n Nofile) hard() string {
	if _, hard, found := strings.Cut(n.Value, ":"); found {
		return hard
	}
	return n.Value
}

// Hard is the hard limit when it is a number.
func (n Nofile) Hard() (uint64, bool) {
	v, err := strconv.ParseUint(n.hard(), 10, 64)
	return v, err == nil
}

// ReadNofile reads containerd.service and its drop-ins.
func ReadNofile(sys system.System) (Nofile, error) {
	var n Nofile
	p, b, err := firstUnit(sys, Unit)
	if err != nil || b == nil {
		return n, err
	}
	n.UnitPath = p
	if err := n.apply(p, b); err != nil {
		return n, err
	}
	dropIns := map[string]string{} // file name -> path
	for _, d := range unitDirs {
		dir := path.Join(d, Unit+".d")
		entries, err := sys.ReadDir(dir)
		if system.NotExist(err) {
			continue
		}
		if err != nil {
			return n, err
		}
		if len(entries) > maxDropIns {
			return n, fmt.Errorf("%s: %d entries, more than the %d drop-ins read", dir, len(entries), maxDropIns)
		}
		for _, e := range entries {
			if _, seen := dropIns[e.Name()]; !seen && strings.HasSuffix(e.Name(), ".conf") {
				dropIns[e.Name()] = path.Join(dir, e.Name())
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(dropIns)) {
		p := dropIns[name]
		b, err := sys.ReadFile(p, system.LimitConfig)
		if err != nil {
			return n, err
		}
		if err := n.apply(p, b); err != nil {
			return n, err
		}
	}
	return n, nil
}

// apply takes the LimitNOFILE= assignments of the unit file at p.
func (n *Nofile) apply(p string, content []byte) error {
	opts, err := unit.DeserializeOptions(bytes.NewReader(content))
	if err != nil {
		return fmt.Errorf("%s: %s", p, logline.QuoteClipped(err.Error()))
	}
	for _, o := range opts {
		if o.Section == "Service" && o.Name == "LimitNOFILE" {
			n.Value, n.From = strings.TrimSpace(o.Value), p
		}
	}
	return nil
}

// systemdLibDirs hold libsystemd-shared-VERSION.so, whose name says the
// image's systemd version without running it: Debian's multiarch
// directories (bookworm, trixie), then the upstream places.
var systemdLibDirs = []string{"/usr/lib/x86_64-linux-gnu/systemd", "/usr/lib/aarch64-linux-gnu/systemd", "/usr/lib/systemd", "/lib/systemd"}

// maxLibEntries bounds the entries read of one of systemdLibDirs (a
// hundred or so in /usr/lib/systemd).
const maxLibEntries = 4096

// SystemdVersion is the image's systemd major version, from the name of
// its shared library; 0 when it cannot be told.
func SystemdVersion(sys system.System) int {
	for _, d := range systemdLibDirs {
		entries, err := sys.ReadDir(d)
		if err != nil || len(entries) > maxLibEntries {
			continue
		}
		for _, e := range entries {
			// libsystemd-shared-257.so (Debian), -255.4-1.fc40.so (Fedora)
			v, ok := strings.CutPrefix(e.Name(), "libsystemd-shared-")
			if !ok || !strings.HasSuffix(v, ".so") {
				continue
			}
			digits := len(v) - len(strings.TrimLeft(v, "0123456789"))
			if digits == 0 || digits > 4 || (v[digits] != '.' && v[digits] != '-') {
				continue
			}
			if n, _ := strconv.Atoi(v[:digits]); n > 0 {
				return n
			}
		}
	}
	return 0
}
