package boot

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// allowedPrograms are the only programs the entrypoint may start: the tools
// that own state it must not reimplement. Never a shell, sed, mount, cat,
// getent or systemd-machine-id-setup: those are system calls and file
// writes here.
var allowedPrograms = map[string]bool{
	"iptables-legacy-save":    true,
	"ip6tables-legacy-save":   true,
	"iptables-nft-save":       true,
	"ip6tables-nft-save":      true,
	"iptables-legacy-restore": true,
	"iptables-nft-restore":    true,
	// etcd-peer-nat's IPv6 redirects (internal/etcdpeers).
	"ip6tables-legacy-restore": true,
	"ip6tables-nft-restore":    true,
	"update-alternatives":      true,
	"kubeadm":                  true,
	// Docker 29's native nftables DNS redirect: read, and our own table
	// written (internal/network/native.go).
	"nft": true,
}

// TestOnlyAllowedPrograms dry-runs and runs every scenario and fails on any
// program outside allowedPrograms (its name exactly: no path, no shell
// wrapping).
func TestOnlyAllowedPrograms(t *testing.T) {
	for _, s := range scenarios(t) {
		t.Run(s.name, func(t *testing.T) {
			tree := copyRoot(t, s)
			h := detect(t, tree)
			DryRun(context.Background(), h, Steps())
			Run(context.Background(), h, Steps(), logline.New(io.Discard, logline.Text))
			for _, argv := range tree.Ran() {
				checkAllowed(t, argv)
			}
		})
	}
}

// shells may never be started, whatever allowedPrograms says: a shell
// would make every argument and variable it is given a program.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "ash": true, "zsh": true, "busybox": true, "env": true}

// checkAllowed fails on a command outside allowedPrograms.
func checkAllowed(t *testing.T, argv []string) {
	t.Helper()
	switch {
	case len(argv) == 0:
		t.Errorf("started an empty argv")
	case shells[filepath.Base(argv[0])]:
		t.Errorf("started a shell: %q", argv)
	case !allowedPrograms[argv[0]]:
		t.Errorf("started %q", argv)
	}
}

// TestNoProcessesOutsideSystem fails when code outside internal/system can
// start a process: every command goes through System.Run, so that the
// test above sees it.
func TestNoProcessesOutsideSystem(t *testing.T) {
	root := "../.."
	for _, dir := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if strings.HasPrefix(rel, "internal/system/") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				if path, _ := strconv.Unquote(imp.Path.Value); path == "os/exec" {
					t.Errorf("%s imports os/exec: run commands through system.System.Run", rel)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); ok {
					switch pkg.Name + "." + sel.Sel.Name {
					case "os.StartProcess", "syscall.Exec", "syscall.ForkExec", "syscall.StartProcess", "unix.Exec", "unix.ForkExec":
						t.Errorf("%s calls %s.%s: start processes only in internal/system", rel, pkg.Name, sel.Sel.Name)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
