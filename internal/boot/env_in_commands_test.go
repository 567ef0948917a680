package boot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/containerd"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/proxy"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// marker is a value no scenario holds, to find where a variable ends up.
func marker(name string) string { return "MARKER-" + name + "-7f3a" }

// snapshotterMarker is a valid snapshotter name (lower case), so that the
// steps after configure_containerd run too.
const snapshotterMarker = "marker-snapshotter-7f3a"

// markedEnviron is a scenario's environment with every value marked, and
// the variables the entrypoint reads set to markers. PATH keeps working:
// the marker is one more (missing) directory in front.
func markedEnviron(orig map[string]string, snapshotter bool) map[string]string {
	env := map[string]string{}
	for k, v := range orig {
		if k == "PATH" {
			env[k] = "/" + marker(k) + ":" + v
			continue
		}
		env[k] = marker(k)
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		env[k] = "http://" + marker(k) + ":3128"
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		env[k] = marker(k) + ",localhost,.svc"
	}
	env[network.DNSSearchEnv] = marker(network.DNSSearchEnv) + ".example"
	if snapshotter {
		env[containerd.SnapshotterEnv] = snapshotterMarker
	}
	return env
}

// markers are the values a command must never see.
func markers(env map[string]string) []string {
	out := []string{snapshotterMarker}
	for k := range env {
		out = append(out, marker(k))
	}
	slices.Sort(out)
	return out
}

// TestNoEnvironmentInCommands dry-runs and runs every scenario with every
// variable's value replaced by a marker, and fails if a command is started
// outside allowedPrograms (a shell above all) or gets a value of the
// environment in its argv or on its stdin. The environment goes to files
// (the proxy drop-in, resolv.conf, config.toml) and to init; a command
// line built from it could be made to do anything.
func TestNoEnvironmentInCommands(t *testing.T) {
	// Where the markers must arrive, at least once over all scenarios,
	// so that the test is not passing for never reading them.
	var mu sync.Mutex
	reached := map[string]bool{}
	for _, s := range scenarios(t) {
		for _, snapshotter := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/snapshotter=%t", s.name, snapshotter), func(t *testing.T) {
				tree := copyRoot(t, s)
				orig := map[string]string{}
				if b, err := os.ReadFile(filepath.Join(tree.Root, system.ProbeDir, "environ")); err == nil {
					orig = system.ParseEnviron(b)
				}
				env := markedEnviron(orig, snapshotter)
				marks := markers(env)
				var environ bytes.Buffer
				for k, v := range env {
					environ.WriteString(k + "=" + v + "\x00")
				}
				if err := hosttest.Files(t, tree).WriteFile("/"+system.ProbeDir+"/"+"environ", environ.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}

				type command struct {
					argv  []string
					stdin []byte
				}
				var started []command
				fake := tree.Exec
				tree.Exec = func(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
					mu.Lock()
					started = append(started, command{slices.Clone(argv), bytes.Clone(stdin)})
					mu.Unlock()
					return fake(ctx, argv, stdin)
				}
				check := func(when string, argv []string, stdin []byte) {
					t.Helper()
					checkAllowed(t, argv)
					for _, m := range marks {
						for _, a := range argv {
							if strings.Contains(a, m) {
								t.Errorf("%s: argv %q carries an environment value (%s)", when, argv, m)
							}
						}
						if bytes.Contains(stdin, []byte(m)) {
							t.Errorf("%s: the stdin of %q carries an environment value (%s)", when, argv, m)
						}
					}
				}

				h := detect(t, tree)
				if v, _ := h.LookupEnv("HTTP_PROXY"); v != env["HTTP_PROXY"] {
					t.Fatalf("the marked environment is not the host's: HTTP_PROXY=%q", v)
				}
				results, _ := DryRun(context.Background(), h, Steps())
				for _, r := range results {
					for _, a := range r.Actions {
						if a.Op == plan.OpRun {
							check("dry run, planned", a.Argv, a.Stdin)
						}
					}
				}
				h.Rand = fixedRand()
				Run(context.Background(), h, Steps(), logline.New(io.Discard, logline.Text))
				for _, argv := range tree.Ran() {
					check("started", argv, nil)
				}
				for _, c := range started {
					check("started", c.argv, c.stdin)
				}

				mu.Lock()
				defer mu.Unlock()
				for file, m := range map[string]string{
					proxy.DropIn:          marker("https_proxy"),
					network.ResolvConf:    marker(network.DNSSearchEnv),
					containerd.ConfigPath: snapshotterMarker,
				} {
					if b, err := tree.ReadFile(file, system.LimitTable); err == nil && bytes.Contains(b, []byte(m)) {
						reached[file] = true
					}
				}
				for _, c := range started {
					if strings.HasSuffix(c.argv[0], "-restore") {
						reached["iptables-restore"] = true
					}
				}
			})
		}
	}
	for _, want := range []string{proxy.DropIn, network.ResolvConf, containerd.ConfigPath, "iptables-restore"} {
		if !reached[want] {
			t.Errorf("no scenario got as far as %s: the test checks nothing there", want)
		}
	}
}
