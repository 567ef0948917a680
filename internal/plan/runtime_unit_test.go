package plan

import (
	"bytes"
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

func testUnit(exe string) RuntimeUnit {
	return RuntimeUnit{Name: "kind-test.service", Description: "a test", Exec: []string{exe, "test", "--flag"}, MemoryMax: "16M", RuntimeMaxSec: "60"}
}

// TestRuntimeUnitRender: only the bounds a unit sets are rendered, after
// its command line, the binary first.
func TestRuntimeUnitRender(t *testing.T) {
	want := "[Unit]\nDescription=a test\n\n[Service]\nType=exec\nExecStart=/entrypoint test --flag\nRuntimeMaxSec=60\nMemoryMax=16M\n\n[Install]\nWantedBy=multi-user.target\n"
	if diff := cmp.Diff(want, string(testUnit("/entrypoint").Render())); diff != "" {
		t.Errorf("unit (-want +got):\n%s", diff)
	}
	u := testUnit(DefaultExecutable)
	u.RuntimeMaxSec, u.TasksMax, u.Restart = "", "8", true
	want = "[Unit]\nDescription=a test\nStartLimitIntervalSec=60\nStartLimitBurst=5\n\n[Service]\nType=exec\nExecStart=/usr/local/bin/entrypoint test --flag\nRestart=on-failure\nRestartSec=2\nMemoryMax=16M\nTasksMax=8\n\n[Install]\nWantedBy=multi-user.target\n"
	if diff := cmp.Diff(want, string(u.Render())); diff != "" {
		t.Errorf("unit (-want +got):\n%s", diff)
	}
}

// TestRuntimeUnitInstall: whatever an earlier boot left (nothing, the unit
// of another binary, a link elsewhere, a file where the link goes), the
// plan installs the unit, every action only warns on failure, and planning
// again on the result plans nothing.
func TestRuntimeUnitInstall(t *testing.T) {
	u := testUnit("/entrypoint")
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, tree *system.Tree)
		ops   []Op
	}{
		{"nothing", func(*testing.T, *system.Tree) {}, []Op{OpMkdir, OpWrite, OpSymlink}},
		{"another binary's unit", func(t *testing.T, tree *system.Tree) {
			install(t, tree, testUnit(DefaultExecutable).Render(), "../kind-test.service")
		}, []Op{OpMkdir, OpWrite}},
		{"link elsewhere", func(t *testing.T, tree *system.Tree) {
			install(t, tree, u.Render(), "/etc/systemd/system/x.service")
		}, []Op{OpMkdir, OpRemove, OpSymlink}},
		{"a file at the link", func(t *testing.T, tree *system.Tree) {
			install(t, tree, u.Render(), "")
		}, []Op{OpMkdir, OpRemove, OpSymlink}},
		{"installed", func(t *testing.T, tree *system.Tree) {
			install(t, tree, u.Render(), "../kind-test.service")
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tree := system.NewTree(t.TempDir())
			tt.setup(t, tree)
			actions := u.Install(u.Installed(tree), "why")
			var ops []Op
			for _, a := range actions {
				ops = append(ops, a.Op)
				if a.OnFail != Warn || a.FailMsg == "" {
					t.Errorf("%s %s: on failure %s %q, want a warning", a.Op, a.Path, a.OnFail, a.FailMsg)
				}
				if a.Op == OpWrite && (!a.Extras().Whole || a.Reason != "why") {
					t.Errorf("the write is not shown whole, or not because of why: %+v", a)
				}
			}
			if diff := cmp.Diff(tt.ops, ops); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
			var logs bytes.Buffer
			if err := Apply(t.Context(), tree, logline.New(&logs, logline.Text), actions, false); err != nil || logs.Len() != 0 {
				t.Fatalf("apply: %v; log %q", err, logs.String())
			}
			if again := u.Install(u.Installed(tree), "why"); len(again) != 0 {
				t.Errorf("planned again on the result: %+v", again)
			}
		})
	}
}

// TestRuntimeUnitInstallFails: a unit that cannot be written (here
// /run/systemd/system is a file) is warned about; the boot goes on.
func TestRuntimeUnitInstallFails(t *testing.T) {
	tree := system.NewTree(t.TempDir())
	if err := tree.MkdirAll("/run/systemd", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tree.WriteFile(RuntimeUnitDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	u := testUnit("/entrypoint")
	var logs bytes.Buffer
	if err := Apply(t.Context(), tree, logline.New(&logs, logline.Text), u.Install(u.Installed(tree), "why"), false); err != nil {
		t.Fatalf("apply: %v", err)
	}
	for _, want := range []string{"WARN: failed to create " + WantsDir(), "WARN: failed to write " + u.Path(), "WARN: failed to enable kind-test.service"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// install writes unit, and link at the wants link: a symbolic link to
// it, or a regular file when it is "".
func install(t *testing.T, tree *system.Tree, unit []byte, link string) {
	t.Helper()
	p := path.Join(WantsDir(), "kind-test.service")
	err := tree.MkdirAll(WantsDir(), 0o755)
	if err == nil {
		err = tree.WriteFile(path.Join(RuntimeUnitDir, "kind-test.service"), unit, 0o644)
	}
	if err == nil && link == "" {
		err = tree.WriteFile(p, []byte("x"), 0o644)
	} else if err == nil {
		err = tree.Symlink(link, p)
	}
	if err != nil {
		t.Fatal(err)
	}
}
