package system_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// noDriver is a character device number no driver has: opening a node of
// it reaches the kernel's device lookup and fails with ENXIO, which is
// how a test sees that an open got that far.
var noDriver = unix.Mkdev(4000, 4000)

// badKinds lay out something at p (a tree path) that exists but is no
// regular file a replay could read; size is the file's read limit.
var badKinds = map[string]func(w *system.TreeFiles, p string, size int) error{
	"named pipe": func(w *system.TreeFiles, p string, _ int) error { return w.Mkfifo(p, 0o644) },
	"directory":  func(w *system.TreeFiles, p string, _ int) error { return w.MkdirAll(p+"/x", 0o755) },
	"symlink loop": func(w *system.TreeFiles, p string, _ int) error {
		return w.Symlink(filepath.Base(p), p)
	},
	"symlink to a regular file": func(w *system.TreeFiles, p string, _ int) error {
		if err := w.WriteFile("/real", []byte("1\n"), 0o644); err != nil {
			return err
		}
		return w.Symlink("/real", p)
	},
	"dangling symlink": func(w *system.TreeFiles, p string, _ int) error { return w.Symlink("/nowhere", p) },
	"file over its limit": func(w *system.TreeFiles, p string, size int) error {
		return w.WriteFile(p, []byte(strings.Repeat("x", size+1)), 0o644)
	},
	"device node": nil, // made with mknod below
}

// TestProbesFailClosed: a .host file that exists but cannot be read is an
// error naming it, for every probe a replay answers from one; it is never
// taken as absent. Before, each of these answered as if the
// file were not there: the replaying machine's environment, a default
// nofile, no overlay failure, a command not installed, a new random seed.
func TestProbesFailClosed(t *testing.T) {
	ctx := context.Background()
	probes := []struct {
		name  string
		limit int
		ask   func(tree *system.Tree) error
	}{
		{"environ", system.LimitConfig, func(tree *system.Tree) error { _, err := tree.Environ(); return err }},
		{"random", system.LimitValue, func(tree *system.Tree) error { _, err := tree.Rand(); return err }},
		{"hosts", system.LimitConfig, func(tree *system.Tree) error { _, err := tree.LookupIP(ctx, "ip", "kind"); return err }},
		{"nofile", system.LimitValue, func(tree *system.Tree) error { _, err := tree.NofileHard(); return err }},
		{"overlay", system.LimitValue, func(tree *system.Tree) error { return tree.OverlayTrial() }},
		{"statfs", system.LimitConfig, func(tree *system.Tree) error { _, err := tree.FSType("/"); return err }},
		{"run/iptables-save", system.LimitOutput, func(tree *system.Tree) error {
			_, _, err := tree.Run(ctx, []string{"iptables-save"}, nil, time.Second)
			return err
		}},
		{"run/iptables-save.fail", system.LimitConfig, func(tree *system.Tree) error {
			_, _, err := tree.Run(ctx, []string{"iptables-save"}, nil, time.Second)
			return err
		}},
		{"run/iptables-save.hang", system.LimitValue, func(tree *system.Tree) error {
			_, _, err := tree.Run(ctx, []string{"iptables-save"}, nil, time.Second)
			return err
		}},
	}
	for _, pr := range probes {
		for kind, lay := range badKinds {
			if kind == "file over its limit" && pr.limit > system.LimitConfig && testing.Short() {
				continue
			}
			t.Run(pr.name+"/"+kind, func(t *testing.T) {
				root := hosttest.Dir(t, map[string]string{
					"proc/self/mountinfo":     "1 0 0:1 / / rw - ext4 /dev/sda rw\n",
					".host/run/iptables-save": "*filter\nCOMMIT\n",
				})
				tree := system.NewTree(root)
				w := hosttest.Files(t, tree)
				p := "/" + system.ProbeDir + "/" + pr.name
				w.Remove(p)
				if lay == nil {
					if err := unix.Mknod(filepath.Join(root, system.ProbeDir, pr.name), unix.S_IFCHR|0o644, int(noDriver)); err != nil {
						t.Fatal(err)
					}
				} else if err := lay(w, p, pr.limit); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- pr.ask(tree) }()
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), p) {
						t.Errorf("%s a %s: %v; want an error naming %s", p, kind, err, p)
					}
					if errors.Is(err, unix.ENXIO) {
						t.Errorf("the device node's open reached the kernel's device lookup: %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s a %s: still reading after 10 s", p, kind)
				}
			})
		}
	}
}

// TestDeviceNeverOpened: a device node at a read path is refused by its
// type, found with an O_PATH open that reaches no driver, both on the live
// path and in a tree. Before, the read opened it: ENXIO from the device
// lookup for a number no driver has.
func TestDeviceNeverOpened(t *testing.T) {
	dir := t.TempDir()
	dev := filepath.Join(dir, "dev")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o644, int(noDriver)); err != nil {
		t.Fatal(err)
	}
	if _, err := (system.Linux{}).ReadFile(dev, system.LimitValue); !isNotRegular(err) {
		t.Errorf("Linux.ReadFile of a device node: %v; want a NotRegularError", err)
	}
	if _, err := system.NewTree(dir).ReadFile("/dev", system.LimitValue); !isNotRegular(err) {
		t.Errorf("Tree.ReadFile of a device node: %v; want a NotRegularError", err)
	}
	if _, err := os.Stat(dev); err != nil {
		t.Fatal(err)
	}
}

func isNotRegular(err error) bool {
	var nr *system.NotRegularError
	return errors.As(err, &nr)
}
