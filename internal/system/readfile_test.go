package system_test

import (
	"path/filepath"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// TestReadOptional: a missing file, and a path through a file where a
// directory should be (/value/below), read as absent (nil, no error); an
// empty file reads as empty, not absent; what cannot be read is still an
// error. The same on a fake host and on the machine.
func TestReadOptional(t *testing.T) {
	tree := hosttest.Tree(t, map[string]string{
		"empty":   "",
		"value":   "x\n",
		"dir/sub": "",
	})
	for name, sys := range map[string]func(string) (system.System, string){
		"Tree":  func(p string) (system.System, string) { return tree, p },
		"Linux": func(p string) (system.System, string) { return system.Linux{}, filepath.Join(tree.Root, p) },
	} {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				path    string
				want    []byte
				wantErr bool
			}{
				{"/missing", nil, false},
				{"/value/below", nil, false},
				{"/empty", []byte{}, false},
				{"/value", []byte("x\n"), false},
				{"/dir", nil, true},
			} {
				s, p := sys(c.path)
				b, err := system.ReadOptional(s, p, system.LimitValue)
				if (err != nil) != c.wantErr || (b == nil) != (c.want == nil) || string(b) != string(c.want) {
					t.Errorf("ReadOptional(%s) = %q (nil: %v), %v; want %q (nil: %v), error: %v", c.path, b, b == nil, err, c.want, c.want == nil, c.wantErr)
				}
			}
		})
	}
}
