package containerd

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// FuzzEnableLinks: any unit file gives an error naming it, or the links
// `systemctl enable` makes: each one in a .wants or .requires directory
// directly under /etc/systemd/system, named as the unit, pointing at it.
func FuzzEnableLinks(f *testing.F) {
	units, _ := filepath.Glob(filepath.Join(hosttest.HostsDir(), "*", "root", "etc", "systemd", "system", "*.service"))
	for _, u := range units {
		if b, err := os.ReadFile(u); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("[Install]\nWantedBy=a.target b.target\nRequiredBy=c.service\n"))
	f.Add([]byte("[Install]\r\nWantedBy=multi-user.target\r\n"))
	f.Add([]byte("[Install]\nWantedBy=../../x.target\n"))
	f.Add([]byte("[Install]\nWantedBy=multi-user.target \\\n  graphical.target\n"))
	f.Fuzz(func(t *testing.T, unit []byte) {
		const unitPath = "/usr/lib/systemd/system/" + FuseUnit
		links, err := enableLinks(unitPath, unit)
		if err != nil {
			if links != nil || !strings.HasPrefix(err.Error(), unitPath+": ") {
				t.Fatalf("enableLinks: %v with error %q, which does not start with the unit's path", links, err)
			}
			return
		}
		if len(links) == 0 {
			t.Fatal("no links and no error")
		}
		for link, target := range links {
			dir := path.Dir(link)
			if target != unitPath || path.Base(link) != FuseUnit || path.Dir(dir) != "/etc/systemd/system" ||
				!(strings.HasSuffix(dir, ".wants") || strings.HasSuffix(dir, ".requires")) || path.Clean(link) != link {
				t.Fatalf("link %s -> %s", link, target)
			}
			if !validUnitName(strings.TrimSuffix(strings.TrimSuffix(path.Base(dir), ".wants"), ".requires")) {
				t.Fatalf("link %s: not in a unit's directory", link)
			}
		}
		again, err := enableLinks(unitPath, unit)
		if err != nil || len(again) != len(links) {
			t.Fatalf("not deterministic: %v, %v", again, err)
		}
	})
}
