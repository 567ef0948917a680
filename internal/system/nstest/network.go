package nstest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// Network is the calling thread's network namespace as iproute2 prints it
// (`ip -json`), an observer independent of the netlink library the code
// under test uses: its links with their addresses, its routes of every
// table and its rules, both families, one JSON object a line, sorted. Left
// out is what changes on its own (carrier, operational state, address
// lifetimes and DAD, route expiry), and the links that container engines
// add and remove while tests run (veth, br-, docker), with their routes.
// An `ip` that fails (as on a dump the kernel interrupted: the namespace
// changed meanwhile) is run again, up to three times in all.
func Network() ([]string, error) {
	var lines []string
	for _, argv := range [][]string{{"addr"}, {"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"}, {"-4", "rule"}, {"-6", "rule"}} {
		var out []byte
		var err error
		for range 3 {
			if out, err = exec.Command("ip", append([]string{"-json"}, argv...)...).Output(); err == nil {
				break
			}
		}
		var objs []map[string]any
		if err == nil {
			err = json.Unmarshal(out, &objs)
		}
		if err != nil {
			return nil, fmt.Errorf("ip -json %s: %w", strings.Join(argv, " "), err)
		}
		for _, o := range objs {
			dev, _ := cmp.Or(o["ifname"], o["dev"]).(string)
			if !slices.ContainsFunc([]string{"veth", "br-", "docker"}, func(p string) bool { return strings.HasPrefix(dev, p) }) {
				b, _ := json.Marshal(steady(o)) // cannot fail: what json decoded
				lines = append(lines, string(b))
			}
		}
	}
	slices.Sort(lines)
	return lines, nil
}

// steady drops from v, decoded from `ip -json`, what the kernel changes on
// its own.
func steady(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range []string{"operstate", "valid_life_time", "preferred_life_time", "tentative", "deprecated", "expires"} {
			delete(v, k)
		}
		for k, e := range v {
			v[k] = steady(e)
		}
	case []any:
		v = slices.DeleteFunc(v, func(e any) bool {
			s, _ := e.(string)
			return slices.Contains([]string{"LOWER_UP", "NO-CARRIER", "M-DOWN", "linkdown", "dead"}, s)
		})
		for i, e := range v {
			v[i] = steady(e)
		}
		return v
	}
	return v
}
