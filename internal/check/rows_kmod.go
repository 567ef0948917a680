package check

// This file holds the row about the kernel modules a rootless node needs
// and cannot load itself.

import (
	"bufio"
	"bytes"
	"path"
	"slices"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// rootlessModules are the modules a rootless node needs loaded by the
// host: the iptables tables kind's rootless guide lists, and xt_recent
// (kind #4204: kube-proxy's and CNI plugins' rules that use "recent").
var rootlessModules = []string{"ip_tables", "ip6_tables", "iptable_nat", "ip6table_nat", "xt_recent"}

// moduleState is what is known of each module: how it is there, by the
// first file that names it: "loaded" (/proc/modules), "built in"
// (modules.builtin), or "shipped" as a file (modules.dep) but not loaded.
type moduleState struct {
	how map[string]string
	// unknown says what could not be told, for the row.
	unknown []string
}

// moduleName is the module a path of modules.builtin or modules.dep
// names: kernel/net/netfilter/xt_recent.ko.zst is xt_recent. The kernel
// spells dashes in file names as underscores in /proc/modules.
func moduleName(p string) string {
	base := path.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

func (c *checker) readModules(want []string) moduleState {
	st := moduleState{how: map[string]string{}}
	scan := func(p string, limit int, how string, field func(line []byte) string) {
		b, err := c.sys.ReadFile(p, limit)
		if err != nil {
			what := "no " + p
			if !system.NotExist(err) {
				what = err.Error()
			}
			st.unknown = append(st.unknown, what)
			return
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, len(b)+1)
		for sc.Scan() {
			if name := field(sc.Bytes()); st.how[name] == "" && slices.Contains(want, name) {
				st.how[name] = how
			}
		}
	}
	firstField := func(line []byte) string {
		f, _, _ := bytes.Cut(line, []byte(" "))
		return string(f)
	}
	scan("/proc/modules", system.LimitConfig, "loaded", firstField)
	rel, err := c.sys.ReadFile("/proc/sys/kernel/osrelease", system.LimitValue)
	release := strings.TrimSpace(string(rel))
	if err != nil || release == "" || strings.Contains(release, "/") {
		st.unknown = append(st.unknown, "the running kernel (no /proc/sys/kernel/osrelease): which are built in or shipped")
		return st
	}
	dir := "/lib/modules/" + release
	scan(dir+"/modules.builtin", system.LimitTable, "built in", func(line []byte) string { return moduleName(string(line)) })
	scan(dir+"/modules.dep", system.LimitTable, "shipped", func(line []byte) string {
		f, _, _ := bytes.Cut(line, []byte(":"))
		return moduleName(string(f))
	})
	return st
}

// kernelModules: a rootless node cannot load modules (modprobe needs the
// host's CAP_SYS_MODULE), so each it needs must be loaded or built in.
func (c *checker) kernelModules() Row {
	const name = "kernel-modules"
	if !c.st.UserNS {
		return Row{name, Pass, "not rootless: the node loads what it needs from the host's /lib/modules", ""}
	}
	st := c.readModules(rootlessModules)
	var ok, notLoaded, absent, untold []string
	for _, m := range rootlessModules {
		switch how := st.how[m]; {
		case how == "loaded" || how == "built in":
			ok = append(ok, m+" "+how)
		case how == "shipped":
			notLoaded = append(notLoaded, m)
		case len(st.unknown) == 0:
			absent = append(absent, m)
		default:
			untold = append(untold, m)
		}
	}
	var obs []string
	if len(ok) > 0 {
		obs = append(obs, strings.Join(ok, ", "))
	}
	if len(notLoaded) > 0 {
		obs = append(obs, "not loaded: "+strings.Join(notLoaded, ", "))
	}
	if len(absent) > 0 {
		obs = append(obs, "not in this kernel: "+strings.Join(absent, ", "))
	}
	if len(untold) > 0 {
		obs = append(obs, "cannot tell "+strings.Join(untold, ", ")+" ("+strings.Join(st.unknown, "; ")+")")
	}
	text := strings.Join(obs, "; ")
	if len(notLoaded) > 0 || len(absent) > 0 {
		return Row{name, Warn, text,
			"a rootless node cannot load kernel modules: on the host, modprobe them and list them in /etc/modules-load.d/ (kind's rootless guide; xt_recent: kind #4204); a module not in the kernel needs another kernel build"}
	}
	return Row{name, Pass, text, ""}
}
