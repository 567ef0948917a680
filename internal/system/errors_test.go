package system

import (
	"context"
	"os"
	"path/filepath"
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
	_, treeErr := tree.Run(ctx, []string{missing}, nil, time.Second)
	_, linuxErr := Linux{}.Run(ctx, []string{missing}, nil, time.Second)
	if !NotInstalled(treeErr) || !NotInstalled(linuxErr) {
		t.Errorf("not installed: %v, %v", treeErr, linuxErr)
	}
	if treeErr.Error() != linuxErr.Error() {
		t.Errorf("not installed words differ:\ntree:  %v\nlinux: %v", treeErr, linuxErr)
	}
	_, failErr := Linux{}.Run(ctx, []string{"false"}, nil, time.Second)
	if failErr == nil || NotInstalled(failErr) || TimedOut(failErr) || NotInstalled(nil) || TimedOut(nil) {
		t.Errorf("a failing command is classed as not installed or timed out: %v", failErr)
	}

	if err := os.MkdirAll(filepath.Join(root, ProbeDir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ProbeDir, "run", "sleep.hang"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, treeErr = tree.Run(ctx, []string{"sleep"}, nil, 20*time.Millisecond)
	_, linuxErr = Linux{}.Run(ctx, []string{"sleep", "5"}, nil, 20*time.Millisecond)
	if !TimedOut(treeErr) || !TimedOut(linuxErr) {
		t.Errorf("timed out: %v, %v", treeErr, linuxErr)
	}
	if treeErr.Error() != linuxErr.Error() {
		t.Errorf("timeout words differ:\ntree:  %v\nlinux: %v", treeErr, linuxErr)
	}
}
