package main

// Only dry runs on fake trees here: a companion command run for real would
// change this machine.

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

func TestCommandFor(t *testing.T) {
	tests := []struct {
		argv0 string
		args  []string
		cmd   string // "" for the entrypoint itself
		rest  []string
		o     options
	}{
		{"/entrypoint", []string{"undo-mount-hacks"}, "undo-mount-hacks", []string{}, options{logFormat: "text"}},
		{"/entrypoint", []string{"--dry-run", "create-kubelet-cgroup-v2", "--root", "x"}, "create-kubelet-cgroup-v2",
			[]string{"--root", "x"}, options{dryRun: true, logFormat: "text"}},
		{"/entrypoint", []string{"--log-format=json", "mount-product-files"}, "mount-product-files", []string{}, options{logFormat: "json"}},
		{"/kind/bin/undo-mount-hacks.sh", nil, "undo-mount-hacks", nil, options{}},
		{"/usr/local/bin/create-kubelet-cgroup-v2", []string{"--dry-run"}, "create-kubelet-cgroup-v2", []string{"--dry-run"}, options{}},
		// The entrypoint: INIT first, "--" before a name, no argument, a
		// flag error (run reports it).
		{"/entrypoint", []string{"/sbin/init", "undo-mount-hacks"}, "", nil, options{}},
		{"/entrypoint", []string{"--", "undo-mount-hacks"}, "", nil, options{}},
		{"/entrypoint", []string{"--dry-run", "--", "undo-mount-hacks"}, "", nil, options{}},
		{"/entrypoint", nil, "", nil, options{}},
		{"/entrypoint", []string{"--bogus", "undo-mount-hacks"}, "", nil, options{}},
		{"/usr/local/bin/entrypoint", []string{"/sbin/init"}, "", nil, options{}},
	}
	for _, tt := range tests {
		cmd, o, rest, ok := commandFor(tt.argv0, tt.args)
		if ok != (tt.cmd != "") || cmd.Name != tt.cmd {
			t.Errorf("%s %q: command %q (%t), want %q", tt.argv0, tt.args, cmd.Name, ok, tt.cmd)
			continue
		}
		if !ok {
			continue
		}
		if diff := cmp.Diff(tt.rest, rest); diff != "" {
			t.Errorf("%s %q: rest (-want +got):\n%s", tt.argv0, tt.args, diff)
		}
		if o != tt.o {
			t.Errorf("%s %q: options %+v, want %+v", tt.argv0, tt.args, o, tt.o)
		}
	}
}

// fakeRoot writes a minimal cgroup v2 node.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := hosttest.Dir(t, files)
	return dir
}

func TestCommandsDryRun(t *testing.T) {
	v2 := fakeRoot(t, map[string]string{
		"proc/self/mountinfo":              "1 0 0:1 / / rw,relatime - overlay overlay rw\n",
		"sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
		"sys/fs/cgroup/cgroup.procs":       "",
		"kind/product_uuid":                "0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a50\n",
	})
	busy := fakeRoot(t, map[string]string{
		"sys/fs/cgroup/cgroup.controllers": "cpu memory pids\n",
		"sys/fs/cgroup/cgroup.procs":       "1\n",
	})
	tests := []struct {
		name   string
		argv0  string
		args   []string
		stdin  string
		code   int
		stdout []string // lines that must appear
		stderr string   // text that must appear
	}{
		{name: "subcommand flags", args: []string{"create-kubelet-cgroup-v2", "--dry-run", "--root", v2},
			stdout: []string{"step 1 create-kubelet-cgroup-v2:", `  write-in-place /sys/fs/cgroup/cgroup.subtree_control "+cpu +memory +pids"`, "  mkdir /sys/fs/cgroup/kubelet 0755"}},
		{name: "global flags", args: []string{"--dry-run", "--root", v2, "undo-mount-hacks"},
			stdout: []string{"step 1 undo-mount-hacks:", "  fact cgroup: v2: nothing was bound"}},
		{name: "called as the script", argv0: "/kind/bin/create-kubelet-cgroup-v2.sh", args: []string{"--dry-run", "--root", busy},
			code: 1, stdout: []string{"  FATAL: /sys/fs/cgroup/cgroup.procs holds processes (PIDs 1): controllers cannot be delegated from a cgroup with processes; run this after systemd has started"}, stderr: "ERROR: create-kubelet-cgroup-v2: "},
		{name: "hook", args: []string{"mount-product-files", "--dry-run", "--root", v2}, stdin: `{"bundle":"/run/b"}`,
			stdout: []string{`  write /run/b/rootfs/product_uuid 0644 "0b6f8f1e-58a4-4c4e-8d7a-3e2f1c9b6a50\n"`}},
		{name: "hook without state", args: []string{"mount-product-files", "--dry-run", "--root", v2},
			code: 1, stderr: "container state on stdin: EOF"},
		{name: "json", args: []string{"--log-format", "json", "undo-mount-hacks", "--dry-run", "--root", v2},
			stdout: []string{`      "step": "undo-mount-hacks",`}},
		{name: "--root needs --dry-run", args: []string{"undo-mount-hacks", "--root", v2}, code: 2, stderr: "--root needs --dry-run"},
		{name: "no arguments", args: []string{"undo-mount-hacks", "--dry-run", "--root", v2, "extra"}, code: 2, stderr: `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		argv0 := tt.argv0
		if argv0 == "" {
			argv0 = "/usr/local/bin/entrypoint"
		}
		var stdout, stderr bytes.Buffer
		code := dispatch(argv0, tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
		if code != tt.code {
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.name, code, tt.code, stdout.String(), stderr.String())
		}
		lines := strings.Split(stdout.String(), "\n")
		for _, want := range tt.stdout {
			found := false
			for _, l := range lines {
				found = found || l == want
			}
			if !found {
				t.Errorf("%s: no line %q in\n%s", tt.name, want, stdout.String())
			}
		}
		if !strings.Contains(stderr.String(), tt.stderr) {
			t.Errorf("%s: stderr %q does not contain %q", tt.name, stderr.String(), tt.stderr)
		}
	}
}
