package containerd

// This file holds the verification of an edit: the edited document, decoded,
// must equal the original with exactly the assignments applied.

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
)

// verify re-reads the edited document and demands that it equals the
// original with exactly the assignments applied, so a planning mistake
// fails loudly instead of reaching disk.
func verify(out []byte, before map[string]any, want []assignment) error {
	after, err := decode(out)
	if err != nil {
		return fmt.Errorf("the edited config would not parse (%v); not writing it", err)
	}
	for _, a := range want {
		set(before, a.path, a.value)
	}
	if !sameValue(before, after) {
		return errors.New("the edited config does not read back as intended; not writing it")
	}
	return nil
}

func set(doc map[string]any, path []string, v any) {
	tbl := doc
	for _, k := range path[:len(path)-1] {
		sub, ok := tbl[k].(map[string]any)
		if !ok {
			sub = map[string]any{}
			tbl[k] = sub
		}
		tbl = sub
	}
	tbl[path[len(path)-1]] = v
}

// sameValue is reflect.DeepEqual for decoded TOML, except that NaN equals
// NaN: `x = nan` in a config must not fail verification.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		return ok && maps.EqualFunc(a, b, sameValue)
	case []any:
		b, ok := b.([]any)
		return ok && slices.EqualFunc(a, b, sameValue)
	case float64:
		b, ok := b.(float64)
		return ok && (math.Float64bits(a) == math.Float64bits(b) || math.IsNaN(a) && math.IsNaN(b))
	}
	return reflect.DeepEqual(a, b)
}

// hasPrefix reports whether path starts with prefix.
func hasPrefix(path, prefix []string) bool {
	return len(path) >= len(prefix) && slices.Equal(path[:len(prefix)], prefix)
}

func formatKeyPath(path []string) string {
	parts := make([]string, len(path))
	for i, k := range path {
		parts[i] = formatKey(k)
	}
	return strings.Join(parts, ".")
}

// formatKey writes a key bare when TOML allows it, else as a basic string.
func formatKey(k string) string {
	bare := k != ""
	for i := 0; i < len(k) && bare; i++ {
		c := k[i]
		bare = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
	}
	if bare {
		return k
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range k {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
