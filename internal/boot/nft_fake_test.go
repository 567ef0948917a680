package boot

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// fakeNftApply loads the file enable_network_magic gives `nft -f -` into a
// replayed host's ruleset (root/.host/run/nft, nft's JSON), so that
// planning again sees what a real nft would list. It knows only that
// file's shape (native.go's nativeScript): the table declared, deleted
// and defined again, nat chains, and rules of address and port matches
// ending in dnat or snat. Anything else is an error, as nft would refuse
// what it cannot parse.
func fakeNftApply(tree *system.Tree, script []byte) error {
	const run = "run/nft"
	old, ok, err := tree.Probe(run, system.LimitOutput)
	if err != nil {
		return err
	}
	doc := struct {
		Nftables []map[string]any `json:"nftables"`
	}{}
	if ok {
		if err := json.Unmarshal(old, &doc); err != nil {
			return fmt.Errorf("nft: the replayed ruleset: %w", err)
		}
	}
	var kept []map[string]any
	for _, o := range doc.Nftables {
		if !ownedBy(o, network.NativeTable) {
			kept = append(kept, o)
		}
	}
	var table, chain string
	for line := range strings.Lines(string(script)) {
		f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), ";"))
		switch {
		case len(f) == 0 || f[0] == "}":
		case len(f) == 3 && f[0] == "table" && f[1] == "ip":
			table = f[2]
		case len(f) == 4 && f[0] == "delete" && f[1] == "table":
		case len(f) == 4 && f[0] == "table" && f[3] == "{":
			table = f[2]
			kept = append(kept, map[string]any{"table": map[string]any{"family": "ip", "name": table}})
		case len(f) == 3 && f[0] == "chain" && f[2] == "{":
			chain = f[1]
		case len(f) >= 5 && f[0] == "type" && f[1] == "nat" && f[2] == "hook":
			kept = append(kept, map[string]any{"chain": map[string]any{"family": "ip", "table": table, "name": chain, "type": "nat", "hook": f[3]}})
		default:
			expr, err := fakeNftRule(f)
			if err != nil {
				return fmt.Errorf("nft: %q: %w", line, err)
			}
			kept = append(kept, map[string]any{"rule": map[string]any{"family": "ip", "table": table, "chain": chain, "expr": expr}})
		}
	}
	doc.Nftables = kept
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	w, err := tree.Files()
	if err != nil {
		return err
	}
	return w.WriteFile("/"+system.ProbeDir+"/"+run, b, 0o644)
}

// ownedBy reports whether a ruleset object is table's or one of its own.
func ownedBy(o map[string]any, table string) bool {
	if t, ok := o["table"].(map[string]any); ok {
		return t["name"] == table
	}
	for _, kind := range []string{"chain", "rule"} {
		if c, ok := o[kind].(map[string]any); ok {
			return c["table"] == table
		}
	}
	return false
}

// fakeNftRule turns "ip daddr A udp dport N dnat to A:P" into nft's JSON
// expressions.
func fakeNftRule(f []string) ([]any, error) {
	var expr []any
	for i := 0; i < len(f); {
		switch {
		case i+2 < len(f) && f[i] == "ip" && (f[i+1] == "daddr" || f[i+1] == "saddr"):
			expr = append(expr, fakeMatch("ip", f[i+1], f[i+2]))
			i += 3
		case i+2 < len(f) && (f[i] == "udp" || f[i] == "tcp"):
			n, err := strconv.Atoi(f[i+2])
			if err != nil {
				return nil, err
			}
			expr = append(expr, fakeMatch(f[i], f[i+1], n))
			i += 3
		case i+2 < len(f) && (f[i] == "dnat" || f[i] == "snat") && f[i+1] == "to":
			ap, err := netip.ParseAddrPort(f[i+2])
			if err != nil {
				return nil, err
			}
			expr = append(expr, map[string]any{f[i]: map[string]any{"addr": ap.Addr().String(), "port": ap.Port()}})
			i += 3
		default:
			return nil, fmt.Errorf("unknown words %q", f[i:])
		}
	}
	return expr, nil
}

func fakeMatch(proto, field string, right any) map[string]any {
	return map[string]any{"match": map[string]any{"op": "==",
		"left": map[string]any{"payload": map[string]any{"protocol": proto, "field": field}}, "right": right}}
}
