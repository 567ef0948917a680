package main

// `entrypoint check`, the built binary: on this machine (JSON valid, exit
// code as documented, the machine unchanged: mount table, step files,
// links, addresses, routes, rules), and on fake hosts with --root.

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/check"
	"github.com/kind-entrypoint/entrypoint/internal/podnet"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

func machineNetwork(t *testing.T) []string {
	t.Helper()
	s, err := nstest.Network()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// parseRows decodes check --json: exactly one JSON array of rows with
// string name, status, observed and hint.
func parseRows(t *testing.T, out string) []check.Row {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var raw []map[string]any
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("stdout is not a JSON array: %v\n%s", err, out)
	}
	if dec.More() {
		t.Errorf("stdout holds more than one JSON value:\n%s", out)
	}
	var rows []check.Row
	for _, r := range raw {
		var row check.Row
		for _, k := range []string{"name", "status", "observed", "hint"} {
			if _, ok := r[k].(string); !ok {
				t.Errorf("row %v: %q is not a string", r, k)
			}
		}
		row.Name, _ = r["name"].(string)
		s, _ := r["status"].(string)
		row.Status = check.Status(s)
		row.Observed, _ = r["observed"].(string)
		row.Hint, _ = r["hint"].(string)
		switch row.Status {
		case check.Pass, check.Warn, check.Fail:
		default:
			t.Errorf("row %s: status %q", row.Name, row.Status)
		}
		rows = append(rows, row)
	}
	return rows
}

func TestCheckBinary(t *testing.T) {
	bin, ctx := binaryUnderTest(t, 2*time.Minute)

	t.Run("this machine", func(t *testing.T) {
		nstest.SkipEmulated(t, qemuNetlink)
		state, network := hostState(t), machineNetwork(t)
		r := runCmd(t, nstest.Command(ctx, bin, "check", "--json"))
		rows := parseRows(t, r.stdout)
		if want := check.ExitCode(rows); r.code != want {
			t.Errorf("exit %d, but the rows say %d", r.code, want)
		}
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Fatal(err)
		}
		if !podnet.Capable(os.Geteuid(), status) {
			t.Fatal("the test runs as root without CAP_NET_ADMIN and CAP_SYS_ADMIN: the pod-network row cannot be tested")
		}
		last := rows[len(rows)-1]
		if last.Name != "pod-network" || last.Status != check.Pass {
			t.Errorf("last row %+v, want pod-network passing (this machine networks pods)", last)
		}
		for _, row := range rows {
			t.Logf("%-4s %-20s %s", row.Status, row.Name, row.Observed)
		}
		if diff := cmp.Diff(state, hostState(t)); diff != "" {
			t.Errorf("check changed the machine (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(network, machineNetwork(t)); diff != "" {
			t.Errorf("check changed the machine's network (-before +after):\n%s", diff)
		}

		// The text form: the same rows, the same exit code.
		text := runCmd(t, nstest.Command(ctx, bin, "check", "--no-pod-network"))
		if text.code != check.ExitCode(rows[:len(rows)-1]) {
			t.Errorf("text form: exit %d, JSON rows without pod-network say %d", text.code, check.ExitCode(rows[:len(rows)-1]))
		}
		lines := strings.Split(strings.TrimSpace(text.stdout), "\n")
		if want := fmt.Sprintf("exit %d", text.code); !strings.HasSuffix(lines[len(lines)-1], want) {
			t.Errorf("text form ends %q, want the verdict %q", lines[len(lines)-1], want)
		}
		if strings.Contains(text.stdout, "pod-network") {
			t.Error("--no-pod-network ran the preflight")
		}
	})

	// Fake hosts: the exit code follows the worst row.
	for _, tt := range []struct {
		host string
		code int
	}{
		{"docker-v2-cgroupns", check.ExitPass},
		{"zfs", check.ExitWarn},
		{"rootless-v2-missing-cpu-pids", check.ExitFail},
	} {
		t.Run("--root "+tt.host, func(t *testing.T) {
			root := hosttest.Host(t, tt.host)
			cmd := nstest.Command(ctx, bin, "check", "--json", "--root", root)
			cmd.Env = []string{} // the host's environment is its .host/environ
			r := runCmd(t, cmd)
			rows := parseRows(t, r.stdout)
			if r.code != tt.code || check.ExitCode(rows) != tt.code {
				t.Errorf("exit %d, rows say %d; want %d", r.code, check.ExitCode(rows), tt.code)
			}
			for _, row := range rows {
				if row.Name == "pod-network" {
					t.Error("the pod-network preflight ran for a --root host")
				}
			}
		})
	}

	t.Run("usage", func(t *testing.T) {
		// The entrypoint's flags before the name: refused (sandboxed:
		// were the name taken for INIT, the steps would run).
		for _, args := range [][]string{{"--log-format=json", "check"}, {"--dry-run", "capture", "-o", "x"}} {
			if r := sandboxed(t, ctx, bin, args...); r.code != 2 || !strings.Contains(r.stderr, "takes its flags after its name") {
				t.Errorf("%q: exit %d, stderr %q; want 2 and why", args, r.code, r.stderr)
			}
		}
		for _, args := range [][]string{{"check", "--bogus"}, {"check", "extra"}, {"check", "--root", "/nonexistent"}} {
			if r := runCmd(t, nstest.Command(ctx, bin, args...)); r.code != check.ExitUsage {
				t.Errorf("%q: exit %d, want %d", args, r.code, check.ExitUsage)
			}
		}
		if r := runCmd(t, nstest.Command(ctx, bin, "check", "--help")); r.code != 0 || !strings.Contains(r.stderr, "exit status: 0") {
			t.Errorf("--help: exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

func TestToolFor(t *testing.T) {
	for _, tt := range []struct {
		args []string
		tool string // "" for none
		rest []string
	}{
		{[]string{"check", "--json"}, "check", []string{"--json"}},
		{[]string{"capture", "-o", "x"}, "capture", []string{"-o", "x"}},
		{[]string{"--log-format=json", "check"}, "check", nil}, // refused when run
		{[]string{"--", "check"}, "", nil},
		{[]string{"/sbin/init", "check"}, "", nil},
		{[]string{"undo-mount-hacks"}, "", nil},
		{nil, "", nil},
	} {
		tl, rest, ok := toolFor(tt.args)
		if ok != (tt.tool != "") || tl.name != tt.tool {
			t.Errorf("%q: tool %q (%t), want %q", tt.args, tl.name, ok, tt.tool)
		}
		if diff := cmp.Diff(tt.rest, rest); ok && diff != "" {
			t.Errorf("%q: rest (-want +got):\n%s", tt.args, diff)
		}
	}
}
