package containerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// TestPlanBadSnapshotterName: a bad KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER
// is refused naming the variable, not config.toml (which is fine, or not
// even there), and nothing is written.
func TestPlanBadSnapshotterName(t *testing.T) {
	config := readTestdata(t, "kind-v2.toml")
	for _, tt := range []struct {
		name   string
		value  string
		config []byte
	}{
		{"shell", `"; rm -rf /`, config},
		{"newline", "native\n[plugins.x]", config},
		{"upper case, no config", "Native", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := Facts{Snapshotter: tt.value, SnapshotterSource: "from " + SnapshotterEnv, Config: tt.config, ConfigMode: 0o644}
			actions, err := Plan(f)
			if err == nil {
				t.Fatalf("Plan accepted %q: %v", tt.value, actions)
			}
			for _, want := range []string{SnapshotterEnv, "invalid snapshotter name"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if strings.Contains(err.Error(), ConfigPath) {
				t.Errorf("error %q blames %s for the variable", err, ConfigPath)
			}
			for _, a := range actions {
				if a.Mutates() {
					t.Errorf("Plan still changes something: %v", a)
				}
			}
		})
	}
}

// TestEnableLinksUnitNames: WantedBy= names units, which never hold a '/':
// a value that does must not place a link outside /etc/systemd/system.
func TestEnableLinksUnitNames(t *testing.T) {
	const unitPath = "/etc/systemd/system/" + FuseUnit
	for _, tt := range []struct {
		name, unit, wantErr string
		want                map[string]string
	}{
		{"multi-user", "[Install]\nWantedBy=multi-user.target\n", "",
			map[string]string{"/etc/systemd/system/multi-user.target.wants/" + FuseUnit: unitPath}},
		{"two, and RequiredBy", "[Install]\nWantedBy=a.target b.target\nRequiredBy=c.service\n", "",
			map[string]string{
				"/etc/systemd/system/a.target.wants/" + FuseUnit:     unitPath,
				"/etc/systemd/system/b.target.wants/" + FuseUnit:     unitPath,
				"/etc/systemd/system/c.service.requires/" + FuseUnit: unitPath,
			}},
		{"path out", "[Install]\nWantedBy=../../../etc/cron.d/x\n",
			unitPath + `: WantedBy= names "../../../etc/cron.d/x", which is not a unit name`, nil},
		{"absolute", "[Install]\nRequiredBy=/etc/x.target\n",
			unitPath + `: RequiredBy= names "/etc/x.target", which is not a unit name`, nil},
		{"control character", "[Install]\nWantedBy=a\x1b[2J.target\n",
			unitPath + `: WantedBy= names "a\x1b[2J.target", which is not a unit name`, nil},
		{"long name", "[Install]\nWantedBy=" + strings.Repeat("/", 2000) + "\n",
			unitPath + `: WantedBy= names "` + strings.Repeat("/", 80) + `"..., which is not a unit name`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := enableLinks(unitPath, []byte(tt.unit))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("enableLinks: %v, %v; want error %s", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("enableLinks = %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("enableLinks = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// TestEnableLinksLongError: the unit parser quotes a bad line whole; the
// error stays one short line naming the unit.
func TestEnableLinksLongError(t *testing.T) {
	const unitPath = "/etc/systemd/system/" + FuseUnit
	_, err := enableLinks(unitPath, []byte("[Install]"+strings.Repeat("\xff garbage ", 200)+"\n"))
	if err == nil || !strings.HasPrefix(err.Error(), unitPath+": ") || len(err.Error()) > 300 {
		t.Errorf("enableLinks: %d bytes of error: %v", len(hosttest.ErrString(err)), err)
	}
}

// TestFuseUnitEnabledRelative: a unit already enabled by a relative link
// (ln -s ../UNIT, or a package's own link) is enabled: nothing to plan.
// Only a link to another file is a conflict, which symlink(2) refuses
// (EEXIST) as systemctl enable does.
func TestFuseUnitEnabledRelative(t *testing.T) {
	for _, tt := range []struct {
		name, link string
		want       int // symlink actions
	}{
		{"absolute", "/etc/systemd/system/" + FuseUnit, 0},
		{"relative", "../" + FuseUnit, 0},
		{"relative, roundabout", "../../system/./" + FuseUnit, 0},
		{"missing", "", 1},
		{"another unit", "../other.service", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := hosttest.Dir(t, map[string]string{
				"kind/x":                                           "",
				".host/statfs":                                     "/ fuseblk\n",
				"etc/containerd/config.toml":                       "version = 2\n",
				"etc/systemd/system/" + FuseUnit:                   "[Service]\nExecStart=/x\n[Install]\nWantedBy=multi-user.target\n",
				"etc/systemd/system/other.service":                 "",
				"etc/systemd/system/multi-user.target.wants/.keep": "",
			})
			if tt.link != "" {
				if err := os.Symlink(tt.link, filepath.Join(root, "etc/systemd/system/multi-user.target.wants", FuseUnit)); err != nil {
					t.Fatal(err)
				}
			}
			f, err := Detect(system.NewTree(root), func(string) string { return "" }, false)
			if err != nil {
				t.Fatal(err)
			}
			actions, err := Plan(f)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, a := range actions {
				if a.Op == plan.OpSymlink {
					n++
				}
			}
			if n != tt.want {
				t.Errorf("%d symlinks planned, want %d: %q", n, tt.want, plan.Strings(actions))
			}
		})
	}
}

// TestPlanLongSnapshotterName: the refusal quotes 80 bytes of the value,
// however long the variable.
func TestPlanLongSnapshotterName(t *testing.T) {
	_, err := Plan(Facts{Snapshotter: strings.Repeat("X", 100000)})
	want := SnapshotterEnv + `: invalid snapshotter name "` + strings.Repeat("X", 80) + `"...: want lowercase letters, digits, '.', '_' or '-', starting with a letter or digit, at most 226 bytes`
	if err == nil || err.Error() != want {
		t.Errorf("error %.200v, want %s", err, want)
	}
}
