package main

// The built binary, run as kind runs it. --dry-run runs on this real machine
// (not only on fake hosts) and must change nothing: the mount table and every file it
// reads are compared before and after. Invocations that must refuse to run
// the steps run in an empty chroot inside new mount and network namespaces,
// so that a regression which ran them anyway could not touch the machine.

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

func TestEntrypointBinary(t *testing.T) {
	bin, ctx := binaryUnderTest(t, 60*time.Second)
	var stepNames []string
	for _, s := range boot.Steps() {
		stepNames = append(stepNames, s.Name)
	}

	t.Run("dry-run on this machine", func(t *testing.T) {
		before := hostState(t)
		r := runCmd(t, nstest.Command(ctx, bin, "--dry-run"))
		if r.code != 0 {
			t.Fatalf("exit %d, want 0; stderr:\n%s", r.code, r.stderr)
		}
		_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
		cgroup := map[bool]string{true: "v2", false: "v1"}[err == nil]
		uidMap, err := os.ReadFile("/proc/self/uid_map")
		if err != nil {
			t.Fatal(err)
		}
		userNS := strings.Join(strings.Fields(string(uidMap)), " ") != "0 0 4294967295"
		if want := fmt.Sprintf("facts:\n  user namespace: %t\n  cgroup: %s\n", userNS, cgroup); !strings.HasPrefix(r.stdout, want) {
			t.Errorf("stdout does not start with the facts %q:\n%s", want, r.stdout)
		}
		checkSteps(t, r.stdout, stepNames)
		if strings.Contains(r.stdout, "FATAL") {
			t.Errorf("a step is fatal on this machine:\n%s", r.stdout)
		}
		if diff := cmp.Diff(before, hostState(t)); diff != "" {
			t.Errorf("--dry-run changed the machine (-before +after):\n%s", diff)
		}
	})

	t.Run("dry-run json", func(t *testing.T) {
		before := hostState(t)
		r := runCmd(t, nstest.Command(ctx, bin, "--dry-run", "--log-format", "json"))
		if r.code != 0 {
			t.Fatalf("exit %d, want 0; stderr:\n%s", r.code, r.stderr)
		}
		var report struct {
			UserNS *bool  `json:"user_namespace"`
			Cgroup string `json:"cgroup"`
			Steps  []struct {
				Step    string            `json:"step"`
				Actions []json.RawMessage `json:"actions"`
			} `json:"steps"`
		}
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		if err := dec.Decode(&report); err != nil {
			t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
		}
		if dec.More() {
			t.Errorf("stdout holds more than one JSON value:\n%s", r.stdout)
		}
		var got []string
		for _, s := range report.Steps {
			got = append(got, s.Step)
			if s.Actions == nil {
				t.Errorf("step %s: no actions array", s.Step)
			}
		}
		if report.UserNS == nil || report.Cgroup == "" {
			t.Errorf("the report lacks the shared facts: %s", r.stdout)
		}
		if diff := cmp.Diff(stepNames, got); diff != "" {
			t.Errorf("steps in the JSON report (-want +got):\n%s", diff)
		}
		for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Errorf("stderr line is not JSON: %q", line)
			}
		}
		if diff := cmp.Diff(before, hostState(t)); diff != "" {
			t.Errorf("--dry-run changed the machine (-before +after):\n%s", diff)
		}
	})

	t.Run("dry-run of the fake host matches its golden plan", func(t *testing.T) {
		root := hosttest.Host(t, scenarioName)
		// The golden was rendered with the test randomness (boot's testSeed).
		hosttest.AddFiles(t, root, map[string]string{system.ProbeDir + "/random": "kind"})
		want, err := os.ReadFile(filepath.Join(scenarioDir, "plan.golden"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := nstest.Command(ctx, bin, "--dry-run", "--root", root)
		cmd.Env = []string{} // the fake host's environment is its .host/environ
		r := runCmd(t, cmd)
		wantCode := 0
		if bytes.Contains(want, []byte("  FATAL: ")) {
			wantCode = -1 // any failure
		}
		if (wantCode == 0) != (r.code == 0) {
			t.Errorf("exit %d; the golden plan has a fatal step: %t", r.code, wantCode != 0)
		}
		if diff := cmp.Diff(string(want), r.stdout); diff != "" {
			t.Errorf("stdout differs from %s/plan.golden (-want +got):\n%s", scenarioDir, diff)
		}
	})

	t.Run("no INIT without --dry-run", func(t *testing.T) {
		r := sandboxed(t, ctx, bin)
		if r.code != 2 || !strings.Contains(r.stderr, "usage: entrypoint") {
			t.Errorf("exit %d, stderr %q; want 2 and the usage", r.code, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("stdout %q, want nothing", r.stdout)
		}
	})

	t.Run("--root without --dry-run", func(t *testing.T) {
		r := sandboxed(t, ctx, bin, "--root", "/", "/sbin/init")
		if r.code != 2 || !strings.Contains(r.stderr, "--root") {
			t.Errorf("exit %d, stderr %q; want 2 and a message naming --root", r.code, r.stderr)
		}
	})

	t.Run("chroot keeps the working directory inside", func(t *testing.T) {
		// A relative --root resolves from the working directory: the
		// package's, outside the chroot, unless the run starts in "/".
		// Before Dir was set this printed the scenario's plan, read
		// from outside the chroot.
		r := sandboxed(t, ctx, bin, "--dry-run", "--root", scenarioDir+"/root")
		if r.code == 0 || strings.Contains(r.stdout, "facts:") {
			t.Errorf("exit %d: the chrooted run read %s outside its root:\n%.300s", r.code, scenarioDir, r.stdout)
		}
	})

	t.Run("--version", func(t *testing.T) {
		r := sandboxed(t, ctx, bin, "--version")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "entrypoint ") {
			t.Errorf("exit %d, stdout %q; want 0 and the version", r.code, r.stdout)
		}
	})
}

// checkSteps checks that out holds "step N NAME:" for every step, in order.
func checkSteps(t *testing.T, out string, names []string) {
	t.Helper()
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "step ") && strings.HasSuffix(line, ":") {
			got = append(got, strings.TrimSuffix(line, ":"))
		}
	}
	var want []string
	for i, n := range names {
		want = append(want, fmt.Sprintf("step %d %s", i+1, n))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps in the dry run (-want +got):\n%s\n%s", diff, out)
	}
}

// hostState describes what a dry run reads and a real run would change: the
// mount table, the files of the steps (content hash, mode, owner, or
// absence), the mount binaries, and /proc/cgroups.
func hostState(t *testing.T) map[string]string {
	t.Helper()
	s := map[string]string{}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	s["/proc/self/mountinfo"] = string(b)
	for _, p := range []string{
		"/etc/containerd/config.toml",
		"/etc/systemd/system.conf.d",
		"/etc/systemd/system/multi-user.target.wants",
		"/etc/machine-id",
		"/var/lib/dbus/machine-id",
		"/etc/resolv.conf",
		"/etc/resolv.conf.original",
		"/usr/bin/mount",
		"/usr/bin/umount",
		"/kind",
	} {
		describePath(t, s, p)
	}
	// Cgroups come and go on a busy machine (other tests, containers): the
	// num_cgroups column is left out; a bind over /proc/cgroups shows in the
	// mount table, and a changed controller list in the other columns.
	b, err = os.ReadFile("/proc/cgroups")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 {
			f = append(f[:2], f[3])
		}
		rows = append(rows, strings.Join(f, " "))
	}
	s["/proc/cgroups (no num_cgroups)"] = strings.Join(rows, "\n")
	return s
}

// describePath records p and, for a directory, everything in it.
func describePath(t *testing.T, s map[string]string, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		s[p] = "absent"
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	desc := fmt.Sprintf("%v %d:%d", fi.Mode(), st.Uid, st.Gid)
	switch {
	case fi.Mode().IsRegular():
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		desc += fmt.Sprintf(" sha256 %x", sha256.Sum256(b))
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			t.Fatal(err)
		}
		desc += " -> " + target
	case fi.IsDir():
		names := hosttest.DirNames(t, p)
		for _, name := range names {
			describePath(t, s, filepath.Join(p, name))
		}
		desc += " [" + strings.Join(names, " ") + "]"
	}
	s[p] = desc
}
