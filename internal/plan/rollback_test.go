package plan

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

func TestRollback(t *testing.T) {
	newTree := func(t *testing.T, fail bool) *system.Tree {
		tree := system.NewTree(t.TempDir())
		hosttest.Files(t, tree).WriteFile("/crt", []byte("old"), 0o644)
		tree.Exec = func(context.Context, []string, []byte) ([]byte, error) {
			if fail {
				return nil, errors.New("exit status 1")
			}
			return nil, hosttest.Files(t, tree).WriteFile("/crt", []byte("new"), 0o644)
		}
		return tree
	}
	actions := []Action{
		WriteFile("/crt.old", []byte("old"), 0o644),
		Remove("/crt"),
		Run([]string{"kubeadm"}, nil, time.Second).
			OrError("kept the old certificate").
			WithRollback(WriteFile("/crt", []byte("old"), 0o644)),
		Info("after"),
	}

	for _, fail := range []bool{false, true} {
		tree := newTree(t, fail)
		var logs bytes.Buffer
		if err := Apply(t.Context(), tree, logline.New(&logs, logline.Text), actions, false); err != nil {
			t.Fatalf("fail %t: %v", fail, err)
		}
		want, wantLog := "new", "INFO: after\n"
		if fail {
			want, wantLog = "old", "ERROR: kept the old certificate: exit status 1\nINFO: after\n"
		}
		if b, _ := tree.ReadFile("/crt", system.LimitTable); string(b) != want {
			t.Errorf("fail %t: /crt = %q, want %q", fail, b, want)
		}
		if diff := cmp.Diff(wantLog, logs.String()); diff != "" {
			t.Errorf("fail %t: log (-want +got):\n%s", fail, diff)
		}
	}

	// A rollback that fails is fatal whatever the policy: what was moved
	// aside is not back.
	tree := newTree(t, true)
	tree.Fail = func(op, p string) error {
		if p == "/crt" && op == "write" {
			return errors.New("disk full")
		}
		return nil
	}
	err := Apply(t.Context(), tree, nil, actions, false)
	if err == nil || !strings.Contains(err.Error(), "rolling back") {
		t.Errorf("failed rollback: %v", err)
	}
}

func TestRollbackRender(t *testing.T) {
	a := Run([]string{"kubeadm"}, nil, time.Second).OrError("kept it").
		WithRollback(WriteFile("/crt", []byte("x"), 0o644), WriteFile("/key", []byte("y"), 0o600))
	want := `run kubeadm (timeout 1s) [on failure: error "kept it"] [rollback: write /crt 0644 "x"; write /key 0600 "y"]`
	if got := a.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	b, err := a.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"on_fail":"error","fail_msg":"kept it","rollback":[{"op":"write","path":"/crt"`) {
		t.Errorf("JSON %s", b)
	}
}
