package main

// `entrypoint capture`, the built binary: a capture extracted with tar
// replays to the same plan (`--dry-run --root`) and the same check, for a
// fake host and for this machine.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

// untar extracts an archive the way docs/troubleshooting.md says.
func untar(t *testing.T, archive string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzpf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	return dir
}

func TestCaptureBinary(t *testing.T) {
	bin, ctx := binaryUnderTest(t, 2*time.Minute)
	if _, err := exec.LookPath("tar"); err != nil {
		t.Fatalf("tar is needed to extract a capture: %v", err)
	}
	hermetic := func(args ...string) *exec.Cmd {
		cmd := nstest.Command(ctx, bin, args...)
		cmd.Env = []string{} // a --root host's environment is its .host/environ
		return cmd
	}

	// A fake host with recorded randomness, so that its plan draws the
	// same identities each time.
	for _, host := range []string{"docker-v1-cgroupns", "id-dmi-sysfs", "rootless-v2-overlay-fails"} {
		t.Run("--root "+host, func(t *testing.T) {
			src := hosttest.Host(t, host)
			hosttest.AddFiles(t, src, map[string]string{system.ProbeDir + "/random": "kind"})
			archive := filepath.Join(t.TempDir(), "node.tar.gz")
			if r := runCmd(t, hermetic("capture", "-o", archive, "--root", src)); r.code != 0 {
				t.Fatalf("capture: exit %d\n%s", r.code, r.stderr)
			}
			dir := untar(t, archive)
			want := runCmd(t, hermetic("--dry-run", "--root", src))
			got := runCmd(t, hermetic("--dry-run", "--root", dir))
			if got.code != want.code {
				t.Errorf("replay exit %d, the host's %d", got.code, want.code)
			}
			if diff := cmp.Diff(want.stdout, got.stdout); diff != "" {
				t.Errorf("the replayed plan differs (-host +replay):\n%s", diff)
			}
			recorded, err := os.ReadFile(filepath.Join(dir, system.ProbeDir, "plan"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.stdout, string(recorded)); diff != "" {
				t.Errorf(".host/plan is not the host's plan (-host +archived):\n%s", diff)
			}
			// check reads through the same recorder: the replay checks
			// the same.
			wantCheck := runCmd(t, hermetic("check", "--json", "--root", src))
			gotCheck := runCmd(t, hermetic("check", "--json", "--root", dir))
			if gotCheck.code != wantCheck.code {
				t.Errorf("check of the replay: exit %d, of the host %d", gotCheck.code, wantCheck.code)
			}
			if diff := cmp.Diff(wantCheck.stdout, gotCheck.stdout); diff != "" {
				t.Errorf("check of the replay differs (-host +replay):\n%s", diff)
			}
		})
	}

	t.Run("this machine", func(t *testing.T) {
		before := hostState(t)
		archive := filepath.Join(t.TempDir(), "node.tar.gz")
		r := runCmd(t, nstest.Command(ctx, bin, "capture", "-o", archive))
		if r.code != 0 {
			t.Fatalf("capture: exit %d\n%s", r.code, r.stderr)
		}
		if diff := cmp.Diff(before, hostState(t)); diff != "" {
			t.Errorf("capture changed the machine (-before +after):\n%s", diff)
		}
		dir := untar(t, archive)
		replay := runCmd(t, hermetic("--dry-run", "--root", dir))
		if replay.code != 0 {
			t.Fatalf("the replay: exit %d, want 0\n%s", replay.code, replay.stderr)
		}
		recorded, err := os.ReadFile(filepath.Join(dir, system.ProbeDir, "plan"))
		if err != nil {
			t.Fatal(err)
		}
		// What a replay cannot reproduce: new identities (the machine drew
		// from crypto/rand, the replay from the recorded seed), the
		// resolver's own error texts, and /kind's filesystem when /kind
		// does not exist (system.Tree answers statfs from mountinfo).
		mask := regexp.MustCompile(`"[0-9a-f]{32}\\n"|"[0-9a-f-]{36}\\n"`)
		resolverWhy := regexp.MustCompile(`(the node's name gives no IPv[46] address) \(.*\); using`)
		norm := func(s string) string {
			var keep []string
			for _, line := range strings.Split(s, "\n") {
				if strings.Contains(line, "fact filesystem of /kind") || (strings.Contains(line, "fact ") && strings.Contains(line, "lookup")) ||
					strings.Contains(line, "fact IPv") || strings.Contains(line, "fact host IP") {
					continue
				}
				line = resolverWhy.ReplaceAllString(line, "$1 (WHY); using")
				keep = append(keep, mask.ReplaceAllString(line, `"ID"`))
			}
			return strings.Join(keep, "\n")
		}
		if diff := cmp.Diff(norm(string(recorded)), norm(replay.stdout)); diff != "" {
			t.Errorf("the replayed plan differs (-machine +replay):\n%s", diff)
		}
		if !strings.Contains(r.stderr, "captured ") {
			t.Errorf("capture said nothing of what it archived: %q", r.stderr)
		}
	})

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{{"capture"}, {"capture", "-o"}, {"capture", "-o", "x", "extra"}, {"capture", "-o", "x", "--root", "/nonexistent"}} {
			if r := runCmd(t, nstest.Command(ctx, bin, args...)); r.code != 2 {
				t.Errorf("%q: exit %d, want 2", args, r.code)
			}
		}
	})
}
