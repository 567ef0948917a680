package network

// Test helpers the network tests share.

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// forEachInput runs test on every testdata/PATTERN.input, in a subtest named
// after the file without ".input" (its golden file is that name plus
// ".golden").
func forEachInput(t *testing.T, pattern string, test func(t *testing.T, name string, input []byte)) {
	t.Helper()
	for _, in := range fixtures(t, pattern+".input") {
		name := strings.TrimSuffix(in.name, ".input")
		t.Run(name, func(t *testing.T) { test(t, name, in.content) })
	}
}

// fixture is one file of testdata: its base name and content.
type fixture struct {
	name    string
	content []byte
}

// fixtures reads the testdata files that match pattern, in name order. No
// file at all is a failure: the fixtures went missing.
func fixtures(tb testing.TB, pattern string) []fixture {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no testdata/%s fixtures: %v", pattern, err)
	}
	all := make([]fixture, 0, len(paths))
	for _, p := range paths {
		content, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, fixture{filepath.Base(p), content})
	}
	return all
}

// checkRefused checks a rewrite that must refuse its input: the error's
// text is wantErr, and no output comes with it.
func checkRefused(t *testing.T, out []byte, err error, wantErr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, got %q", out)
	}
	if diff := cmp.Diff(err.Error(), wantErr); diff != "" {
		t.Errorf("error mismatch (-got +want):\n%s", diff)
	}
	if out != nil {
		t.Errorf("output %q along with the error", out)
	}
}

// DetectIptables is Probes.DetectIptables on probes of its own.
func DetectIptables(ctx context.Context, sys system.System, timeout time.Duration) (IptablesFacts, error) {
	return NewProbes(sys, timeout).DetectIptables(ctx)
}

// DetectMagic is Probes.DetectMagic on probes of its own.
func DetectMagic(ctx context.Context, sys system.System, lookupEnv func(string) (string, bool), ipt IptablesFacts, timeout time.Duration) (MagicFacts, error) {
	return NewProbes(sys, timeout).DetectMagic(ctx, lookupEnv, ipt)
}

// RewriteResolvConf is rewriteResolvConf of a host IP in text.
func RewriteResolvConf(orig []byte, hostIP string, search *string) ([]byte, error) {
	host, err := netip.ParseAddr(hostIP)
	if err != nil {
		return nil, fmt.Errorf("host IP: %w", err)
	}
	return rewriteResolvConf(orig, host, search)
}
