package system

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunErrorsAgree: a program that is not installed, or that hangs, fails
// with the same typed error and the same words on this machine and on a
// replayed host, so a capture replays its plan line for line.
func TestRunErrorsAgree(t *testing.T) {
	ctx := context.Background()
	const missing = "entrypoint-test-no-such-command"
	root := t.TempDir()
	tree := NewTree(root)
	_, _, treeErr := tree.Run(ctx, []string{missing}, nil, time.Second)
	_, _, linuxErr := Linux{}.Run(ctx, []string{missing}, nil, time.Second)
	if !NotInstalled(treeErr) || !NotInstalled(linuxErr) {
		t.Errorf("not installed: %v, %v", treeErr, linuxErr)
	}
	if treeErr.Error() != linuxErr.Error() {
		t.Errorf("not installed words differ:\ntree:  %v\nlinux: %v", treeErr, linuxErr)
	}
	_, _, failErr := Linux{}.Run(ctx, []string{"false"}, nil, time.Second)
	if failErr == nil || NotInstalled(failErr) || TimedOut(failErr) || NotInstalled(nil) || TimedOut(nil) {
		t.Errorf("a failing command is classed as not installed or timed out: %v", failErr)
	}

	if err := os.MkdirAll(filepath.Join(root, ProbeDir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ProbeDir, "run", "sleep.hang"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, treeErr = tree.Run(ctx, []string{"sleep"}, nil, 20*time.Millisecond)
	_, _, linuxErr = Linux{}.Run(ctx, []string{"sleep", "5"}, nil, 20*time.Millisecond)
	if !TimedOut(treeErr) || !TimedOut(linuxErr) {
		t.Errorf("timed out: %v, %v", treeErr, linuxErr)
	}
	if treeErr.Error() != linuxErr.Error() {
		t.Errorf("timeout words differ:\ntree:  %v\nlinux: %v", treeErr, linuxErr)
	}
}

// TestRunStderr: Run hands back standard error apart from standard output,
// on success and on failure, so that Apply can log both.
func TestRunStderr(t *testing.T) {
	ctx := context.Background()
	const missing = "/entrypoint-test-no-such-file"
	out, errOut, err := Linux{}.Run(ctx, []string{"ls", "-d", "/", missing}, nil, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("error %v: want it to quote ls's complaint about %s", err, missing)
	}
	if string(out) != "/\n" || !strings.Contains(string(errOut), missing) {
		t.Errorf("stdout %q, stderr %q: want / on one and the complaint on the other", out, errOut)
	}
	out, errOut, err = Linux{}.Run(ctx, []string{"cat"}, []byte("in\n"), 5*time.Second)
	if err != nil || string(out) != "in\n" || len(errOut) != 0 {
		t.Errorf("cat: %q, %q, %v", out, errOut, err)
	}
}
