package cgroupfix

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// The logic of create-kubelet-cgroup-v2 (internal/companion runs it, after
// systemd started: see doc.go).

// KubeletCgroupFacts is what create-kubelet-cgroup-v2 needs.
type KubeletCgroupFacts struct {
	// Controllers are the root's available controllers.
	Controllers []string
	// Procs are the PIDs in the root cgroup.
	Procs []string
	// Exists and Enabled: whether each cgroup ("/", "/kubelet",
	// "/kubelet.slice") exists, and its cgroup.subtree_control.
	Exists  map[string]bool
	Enabled map[string][]string
}

// DetectKubeletCgroup reads the facts.
func DetectKubeletCgroup(sys system.System) (KubeletCgroupFacts, error) {
	f := KubeletCgroupFacts{Exists: map[string]bool{}, Enabled: map[string][]string{}}
	b, err := sys.ReadFile(Root+"/cgroup.procs", system.LimitConfig)
	if err != nil {
		return f, err
	}
	for _, pid := range strings.Fields(string(b)) {
		// A process of another cgroup namespace reads as 0.
		if pid != "0" {
			f.Procs = append(f.Procs, pid)
		}
	}
	controllers, err := ReadControllers(sys)
	if err != nil {
		return f, err
	}
	f.Controllers = strings.Fields(controllers)
	for _, g := range append([]string{"/"}, KubeletRoots...) {
		dir := path.Join(Root, g)
		fi, err := sys.Stat(dir)
		if system.NotExist(err) {
			continue
		}
		if err != nil {
			return f, err
		}
		if !fi.IsDir() {
			return f, fmt.Errorf("%s: not a directory", dir)
		}
		f.Exists[g] = true
		b, err := system.ReadOptional(sys, dir+"/cgroup.subtree_control", system.LimitValue)
		if err != nil {
			return f, err
		}
		f.Enabled[g] = strings.Fields(string(b))
	}
	return f, nil
}

// PlanKubeletCgroup enables every available controller for the children of
// the root, /kubelet and /kubelet.slice, so the kubelet finds them all
// (hugetlb is not enabled at the root by default). The kernel's "no
// internal processes" rule refuses that while the root cgroup holds a
// process: this runs after systemd has moved every process out of it.
func PlanKubeletCgroup(f KubeletCgroupFacts) ([]plan.Action, error) {
	if len(f.Procs) > 0 {
		return nil, fmt.Errorf("%s/cgroup.procs holds processes (PIDs %s): controllers cannot be delegated from a cgroup with processes; run this after systemd has started",
			Root, listClipped(f.Procs))
	}
	var actions []plan.Action
	if len(f.Controllers) == 0 {
		// The cgroups are made all the same: the kubelet needs its
		// cgroup-root to exist (the script makes them too).
		actions = append(actions, plan.Warning(ControllersFile+" lists no controller; nothing to delegate"))
	}
	enable := "+" + strings.Join(f.Controllers, " +")
	for _, g := range append([]string{"/"}, KubeletRoots...) {
		dir := path.Join(Root, g)
		if !f.Exists[g] {
			actions = append(actions, plan.Mkdir(dir, 0o755))
		}
		if len(f.Controllers) == 0 || f.Exists[g] && containsAll(f.Enabled[g], f.Controllers) {
			continue
		}
		// cgroupfs files cannot be replaced, only written.
		actions = append(actions, plan.WriteInPlace(dir+"/cgroup.subtree_control", []byte(enable)))
	}
	return actions, nil
}

// maxListed is how many items of a long list an error names.
const maxListed = 10

// listClipped joins the first maxListed items of l, saying how many there
// are when it leaves some out: one error line, however busy the host.
func listClipped(l []string) string {
	if len(l) <= maxListed {
		return strings.Join(l, ", ")
	}
	return fmt.Sprintf("%s, … (%d in all)", strings.Join(l[:maxListed], ", "), len(l))
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
