package companion

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

func TestMain(m *testing.M) { nstest.Sandbox(m, nil) }

// kernelTree reads and writes files below a directory, as a Tree does, but
// mounts for real: the bind mounts of the hook are made by the kernel, in
// the test's own mount namespace.
type kernelTree struct{ *system.Tree }

func (k kernelTree) Mount(source, target, fstype string, flags system.MountFlags, data string) error {
	return system.Linux{}.Mount(k.Path(source), k.Path(target), fstype, flags, data)
}

func (k kernelTree) Unmount(target string, flags int) error {
	return system.Linux{}.Unmount(k.Path(target), flags)
}

// TestMountProductFilesKernel runs the createContainer hook against a
// bundle made in a temp dir: the container's DMI files end up read-only
// binds of its own copies of the node's /kind/product_* files.
func TestMountProductFilesKernel(t *testing.T) {
	nstest.Unshare(t, unix.CLONE_NEWNS)
	const uuid = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a\n"
	files := map[string]string{
		"kind/product_name":                                     "kind\n",
		"kind/product_uuid":                                     uuid,
		"sys/class/dmi/id/product_name":                         "Standard PC\n",
		"sys/class/dmi/id/product_uuid":                         "host-uuid\n",
		"sys/devices/virtual/dmi/id/product_uuid":               "host-uuid\n",
		"bundle/rootfs/sys/class/dmi/id/product_name":           "Standard PC\n",
		"bundle/rootfs/sys/class/dmi/id/product_uuid":           "host-uuid\n",
		"bundle/rootfs/sys/devices/virtual/dmi/id/product_uuid": "host-uuid\n",
	}
	node := hosttest.Dir(t, files)
	sys := kernelTree{system.NewTree(node)}
	h := &boot.Host{Sys: sys, LookupEnv: func(string) (string, bool) { return "", false }}
	cmd, ok := Lookup("mount-product-files")
	if !ok {
		t.Fatal("no mount-product-files command")
	}
	var log bytes.Buffer
	steps := cmd.Steps(strings.NewReader(`{"ociVersion":"1.0.2","id":"c1","status":"creating","bundle":"/bundle"}`))
	if err := boot.Run(context.Background(), h, steps, logline.New(&log, logline.Text)); err != nil {
		t.Fatalf("hook: %v\n%s", err, log.String())
	}
	t.Cleanup(func() {
		for _, m := range nstest.ThreadMountinfo(t) {
			if strings.HasPrefix(m.Mountpoint, node) {
				unix.Unmount(m.Mountpoint, unix.MNT_DETACH)
			}
		}
	})

	mounts := nstest.ThreadMountinfo(t)
	for target, want := range map[string]string{
		"sys/class/dmi/id/product_name":           "kind\n",
		"sys/class/dmi/id/product_uuid":           uuid,
		"sys/devices/virtual/dmi/id/product_uuid": uuid,
	} {
		p := filepath.Join(node, "bundle/rootfs", target)
		m := system.Top(mounts, p)
		if m == nil {
			t.Errorf("%s is not a mount point", target)
			continue
		}
		if !strings.HasPrefix(m.Options, "ro") {
			t.Errorf("%s mounted %q, want read-only", target, m.Options)
		}
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Errorf("%s reads %q, want %q", target, got, want)
		}
		err := os.WriteFile(p, []byte("x"), 0o644)
		if !errors.Is(err, unix.EROFS) {
			t.Errorf("writing %s: %v, want EROFS", target, err)
		}
	}
	// The node's own DMI files are untouched.
	if got, _ := os.ReadFile(filepath.Join(node, "sys/class/dmi/id/product_uuid")); string(got) != "host-uuid\n" {
		t.Errorf("the node's product_uuid became %q", got)
	}
}
