package boot

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// stepPackages are the packages of the entrypoint's steps (steps.go).
var stepPackages = []string{"userns", "containerd", "proxy", "mounts", "cgroupfix", "identity", "network", "etcdpeers"}

// TestImports: a step package imports no other step package (what they
// share is the System seam's: the mount table, the not-exist test), and
// the commands built on the steps import no more than they use: check
// reads the dry run's facts, not capture's Recorder nor fix_mount's
// helpers. Only the non-test files count.
func TestImports(t *testing.T) {
	const module = "github.com/kind-entrypoint/entrypoint/internal/"
	forbidden := map[string][]string{
		"companion": {"mounts", "capture"},
		"check":     {"mounts", "capture"},
	}
	for _, p := range stepPackages {
		for _, q := range stepPackages {
			if p != q {
				forbidden[p] = append(forbidden[p], q)
			}
		}
	}
	for pkg, not := range forbidden {
		files, err := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, q := range not {
					if path == module+q {
						t.Errorf("%s imports %s", f, q)
					}
				}
			}
		}
	}
}
