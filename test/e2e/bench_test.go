//go:build e2ebench

// End-to-end benchmarks: node containers in Docker, started the way kind
// starts them, measured from outside. bench/run.sh runs them (after
// test/e2e/run.sh --setup-only has made Docker and the node image ready):
//
//	go test -tags e2ebench -run '^$' -bench . -benchtime 10x ./test/e2e/
//
// -benchtime Nx is the number of nodes each benchmark boots, one after
// another. ns/op is left out: a "op" is a whole container's life, and the
// figures that matter are reported as metrics (see bench/results.md for
// their definitions):
//
//   - BenchmarkBoot: per variant, the times from the container's StartedAt
//     to the entrypoint's "INFO: starting init" line, to init's first line
//     (tty only: without a console systemd prints nothing to the log), and
//     to the line kind's CLI waits for; the entrypoint's own
//     "pre-init finished in N ms"; and the deliberate tty settle.
//   - BenchmarkProgramsBeforeInit: the programs (successful execve) and
//     processes an entrypoint starts before it execs init, from strace.
//   - BenchmarkPeakRSS: the entrypoint's peak resident set size on the real
//     boot path in a node, and for --dry-run here and on the fake hosts.
//   - BenchmarkBinary: the size of the static binary.
//
// The tag is not e2e's, so that the tier never runs these and these never
// need the tier's TestMain; all names here start with "bench" for the
// same reason.
package e2e

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/bench/bootlog"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/test/tier"
)

const (
	// benchLabel marks every container and network made here; bench/run.sh
	// removes leftovers by it (the tier's run.sh leaves them alone).
	benchLabel  = "kind-entrypoint-bench"
	benchPrefix = "kind-ep-bench-"
	// benchInit is what the node image's ENTRYPOINT execs.
	benchInit = "/sbin/init"
	// benchEntrypoint is where kind's image has its entrypoint.
	benchEntrypoint = "/usr/local/bin/entrypoint"
	// benchWaitLimit bounds every wait for a node.
	benchWaitLimit = 90 * time.Second
	// benchQuiet is how long a node is left alone after `docker run`
	// before anything asks Docker about it: on 2 cores a docker CLI
	// process during the node's first second would be measured too.
	benchQuiet = 1500 * time.Millisecond
)

var (
	benchNodeImage = envOr("E2E_NODE_IMAGE", "kind-entrypoint-e2e/node:dev")
	// benchReference is the reference script; bench/run.sh sets it (kind
	// v0.23.0's, from its Go module).
	benchReference = envOr("E2E_BENCH_REFERENCE", "/tmp/entrypoint.v0.23")
	benchBinary    = envOr("E2E_BENCH_BINARY", "../../bin/entrypoint")
	benchHosts     = envOr("E2E_BENCH_HOSTS", "../../testdata/hosts")
	// benchDetails, when set, is a file the benchmarks write their raw
	// samples to (JSON), for bench/report.
	benchDetails = os.Getenv("E2E_BENCH_DETAILS")
	benchRunID   = tier.RunID()
)

// --- images -------------------------------------------------------------

var (
	benchImagesOnce sync.Once
	benchImagesErr  error
	benchImageNames struct{ node, reference, straceNode, straceReference string }
)

// benchImages builds, in a temporary directory, the images derived from the
// node image: a default node (the e2e image points the iptables
// alternatives at legacy, so that the e2e tier sees select_iptables switch
// them; kind's base image keeps Debian's default, nft, and a default node
// on an nft host switches nothing), the reference bash entrypoint in its
// place, and both with strace installed (apt, inside docker build). Every
// benchmark boots these, ours and the reference alike. Nothing of this is
// kept in the repository. It also checks that the node image holds the
// binary being benchmarked.
func benchImages(b *testing.B) (node, reference, straceNode, straceReference string) {
	b.Helper()
	benchImagesOnce.Do(func() { benchImagesErr = benchBuildImages() })
	if benchImagesErr != nil {
		b.Fatal(benchImagesErr)
	}
	n := benchImageNames
	return n.node, n.reference, n.straceNode, n.straceReference
}

func benchBuildImages() error {
	if err := benchCheckNodeImage(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "kind-entrypoint-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	script, err := os.ReadFile(benchReference)
	if err != nil {
		return fmt.Errorf("the reference entrypoint (E2E_BENCH_REFERENCE): %w", err)
	}
	n := &benchImageNames
	n.node = "kind-entrypoint-bench/node:dev"
	n.reference = "kind-entrypoint-bench/reference:dev"
	n.straceNode = "kind-entrypoint-bench/strace:dev"
	n.straceReference = "kind-entrypoint-bench/strace-reference:dev"
	files := map[string]string{
		"entrypoint": string(script),
		"Dockerfile.node": "FROM " + benchNodeImage + "\n" +
			"RUN update-alternatives --auto iptables && update-alternatives --auto ip6tables\n",
		// The node image's undo-mount-hacks.service runs our binary's
		// companion command; with the reference script there it would
		// run the whole entrypoint again. kind's undo-mount-hacks.sh
		// unmounts /proc/cgroups, failure ignored.
		"undo-mount-hacks.conf": "[Service]\nExecStart=\nExecStart=-/bin/umount /proc/cgroups\n",
		"Dockerfile.reference": "FROM " + n.node + "\n" +
			"COPY entrypoint " + benchEntrypoint + "\n" +
			"COPY undo-mount-hacks.conf /etc/systemd/system/undo-mount-hacks.service.d/bench.conf\n",
		"Dockerfile.strace": "FROM " + n.node + "\n" +
			"RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends strace && rm -rf /var/lib/apt/lists/*\n",
	}
	if err := writeBuildContext(dir, files); err != nil {
		return err
	}
	// The strace-reference image is the strace image plus the reference:
	// apt runs once.
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile.strace-reference"), []byte(
		strings.Replace(files["Dockerfile.reference"], "FROM "+n.node, "FROM "+n.straceNode, 1)), 0o644); err != nil {
		return err
	}
	for _, img := range []struct{ tag, dockerfile string }{
		{n.node, "Dockerfile.node"},
		{n.reference, "Dockerfile.reference"},
		{n.straceNode, "Dockerfile.strace"},
		{n.straceReference, "Dockerfile.strace-reference"},
	} {
		cmd := exec.Command("docker", "build", "-q", "-t", img.tag, "-f", filepath.Join(dir, img.dockerfile), dir)
		cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("docker build %s: %w\n%s", img.tag, err, out)
		}
	}
	return nil
}

// benchCheckNodeImage fails unless the node image's entrypoint is the
// binary benchmarked here (else run test/e2e/run.sh --setup-only).
func benchCheckNodeImage() error {
	data, err := os.ReadFile(benchBinary)
	if err != nil {
		return fmt.Errorf("the binary (E2E_BENCH_BINARY; make build): %w", err)
	}
	sum := sha256.Sum256(data)
	out, err := dockerCmd(time.Minute, "run", "--rm", "--entrypoint", "sha256sum", benchNodeImage, benchEntrypoint)
	if err != nil {
		return err
	}
	if f := strings.Fields(out); len(f) == 0 || f[0] != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("%s holds another %s than %s: rebuild it (test/e2e/run.sh --setup-only)", benchNodeImage, benchEntrypoint, benchBinary)
	}
	return nil
}

// --- nodes --------------------------------------------------------------

// benchNetwork creates the user-defined network the nodes use (kind's
// nodes need one for Docker's embedded DNS), removed when b ends.
func benchNetwork(b *testing.B) string {
	b.Helper()
	name := benchPrefix + benchRunID + "-" + strings.ToLower(strings.TrimPrefix(b.Name(), "Benchmark"))
	tier.NewNetwork(b, "docker", name, "--label", benchLabel+"="+benchRunID)
	return name
}

var benchNodeSeq int

// benchRun starts a node container: kind's flags, then extra, then the
// image and its arguments. It returns the name; the container is removed
// (with its volumes) by the returned function.
func benchRun(b *testing.B, network, what string, tty bool, extra []string, image string, args ...string) (string, func()) {
	b.Helper()
	benchNodeSeq++
	name := fmt.Sprintf("%s%s-%s-%d", benchPrefix, benchRunID, what, benchNodeSeq)
	argv := append([]string{"run", "--name", name, "--label", benchLabel + "=" + benchRunID}, tier.KindRunArgs("docker", tier.KindNode{Name: name, Network: network, Cgroupns: "private", NoTTY: !tty})...)
	argv = append(argv, extra...)
	argv = append(argv, image)
	argv = append(argv, args...)
	mustDocker(b, argv...)
	return name, func() {
		if _, err := dockerCmd(2*time.Minute, "rm", "--force", "--volumes", name); err != nil {
			b.Error(err)
		}
	}
}

// benchWaitFor polls (after benchQuiet, every 250 ms) until done returns
// true or an error.
func benchWaitFor(what string, done func() (bool, error)) error {
	time.Sleep(benchQuiet)
	start := time.Now()
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Since(start) > benchWaitLimit {
			return fmt.Errorf("%s: not after %v", what, benchWaitLimit)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// benchLogs returns the node's log with docker's timestamps.
func benchLogs(name string) ([]bootlog.Line, error) {
	out, err := tier.Logs(time.Minute, "docker", "-t", name)
	if err != nil {
		return nil, err
	}
	return bootlog.ParseDockerLogs(out)
}

func benchExited(name string) error {
	st, err := dockerCmd(time.Minute, "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}} {{.RestartCount}}", name)
	if err != nil {
		return err
	}
	if f := strings.Fields(st); len(f) == 3 && (f[0] == "exited" || f[2] != "0") {
		logs, _ := tier.Logs(time.Minute, "docker", "--tail", "40", name)
		return fmt.Errorf("%s exited (status, exit code, restarts: %s); log:\n%s", name, strings.TrimSpace(st), logs)
	}
	return nil
}

// benchWaitSystemd waits until systemd in the node has finished starting
// (running or degraded), so that the next node does not boot alongside.
func benchWaitSystemd(name string) (string, error) {
	var state string
	err := benchWaitFor(name+": systemd up", func() (bool, error) {
		out, _ := dockerCmd(benchWaitLimit, "exec", name, "systemctl", "is-system-running", "--wait")
		state = strings.TrimSpace(out)
		switch state {
		case "running", "degraded":
			return true, nil
		}
		return false, benchExited(name)
	})
	return state, err
}

func benchStartedAt(name string) (time.Time, error) {
	out, err := dockerCmd(time.Minute, "inspect", "-f", "{{.State.StartedAt}}", name)
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339Nano, strings.TrimSpace(out))
}

// --- details for bench/report ------------------------------------------

var (
	benchDetailsMu sync.Mutex
	benchDetailMap = map[string]any{}
)

// benchRecord keeps a benchmark's raw samples for E2E_BENCH_DETAILS.
func benchRecord(b *testing.B, v any) {
	b.Helper()
	if benchDetails == "" {
		return
	}
	benchDetailsMu.Lock()
	defer benchDetailsMu.Unlock()
	benchDetailMap[b.Name()] = v
	data, err := json.MarshalIndent(benchDetailMap, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(benchDetails, data, 0o644); err != nil {
		b.Fatal(err)
	}
}

// --- BenchmarkBoot ------------------------------------------------------

// bootSample is one node's start, relative to its StartedAt (ms; -1 when
// the log has no such line).
type bootSample struct {
	Node         string  `json:"node"`
	StartingInit float64 `json:"starting_init_ms"`
	FirstInit    float64 `json:"first_init_ms"`
	PreInit      float64 `json:"pre_init_ms"`
	KindReady    float64 `json:"kind_ready_ms"`
	// InitAfter is init's first line − "INFO: starting init" (tty):
	// the settle, the execve, and systemd's start up to its banner.
	InitAfter float64  `json:"init_after_starting_init_ms"`
	FirstLine string   `json:"first_init_line,omitempty"`
	Fallback  bool     `json:"fallback,omitempty"`
	Lost      []string `json:"lost,omitempty"`
	Systemd   string   `json:"systemd"`
}

// BenchmarkBoot boots b.N nodes one after another for each variant: our
// binary, the reference bash script, and init started directly (the
// baseline: what Docker and systemd take without any entrypoint); with
// kind's --tty, and without it.
func BenchmarkBoot(b *testing.B) {
	node, reference, _, _ := benchImages(b)
	network := benchNetwork(b)
	for _, v := range []struct {
		name       string
		image      string
		tty        bool
		entrypoint bool
		settle     time.Duration // --tty-settle, when not the default
	}{
		{"entrypoint/tty", node, true, true, 0},
		{"entrypoint/no-tty", node, false, true, 0},
		{"entrypoint/tty-settle-100ms", node, true, true, 100 * time.Millisecond},
		{"reference/tty", reference, true, true, 0},
		{"reference/no-tty", reference, false, true, 0},
		{"init-only/tty", node, true, false, 0},
	} {
		b.Run(v.name, func(b *testing.B) {
			ours := v.entrypoint && v.image == node
			var extra, args []string
			if !v.entrypoint {
				extra = []string{"--entrypoint", benchInit}
			}
			settle := time.Duration(0)
			if ours && v.tty {
				settle = logline.TTYSettle
			}
			if v.settle != 0 {
				settle = v.settle
				extra = []string{"--entrypoint", "/entrypoint"}
				args = []string{"--tty-settle=" + v.settle.String(), benchInit}
			}
			var samples []bootSample
			for b.Loop() {
				samples = append(samples, benchBootOne(b, network, v.tty, v.entrypoint, extra, v.image, args...))
			}
			benchRecord(b, samples)
			pick := func(f func(bootSample) float64) []time.Duration {
				var ds []time.Duration
				for _, s := range samples {
					if ms := f(s); ms >= 0 {
						ds = append(ds, time.Duration(ms*float64(time.Millisecond)))
					}
				}
				return ds
			}
			report := func(name string, ds []time.Duration) {
				if len(ds) == 0 {
					return
				}
				b.ReportMetric(bootlog.Ms(bootlog.Median(ds)), name+"-median-ms")
				b.ReportMetric(bootlog.Ms(bootlog.Max(ds)), name+"-max-ms")
			}
			b.ReportMetric(0, "ns/op")
			if v.tty {
				report("first-init", pick(func(s bootSample) float64 { return s.FirstInit }))
			}
			if v.entrypoint {
				report("starting-init", pick(func(s bootSample) float64 { return s.StartingInit }))
			}
			if v.entrypoint && v.tty {
				report("init-after-starting-init", pick(func(s bootSample) float64 { return s.InitAfter }))
			}
			if ours {
				report("pre-init", pick(func(s bootSample) float64 { return s.PreInit }))
				b.ReportMetric(bootlog.Ms(settle), "settle-ms")
			}
			report("kind-ready", pick(func(s bootSample) float64 { return s.KindReady }))
			lost := 0
			for _, s := range samples {
				if len(s.Lost) > 0 {
					lost++
				}
			}
			if v.entrypoint {
				b.ReportMetric(float64(lost), "lost-lines-nodes")
			}
			b.ReportMetric(float64(len(samples)), "nodes")
		})
	}
}

// benchBootOne starts one node, waits until systemd is up, reads the
// timings from its log and removes it.
func benchBootOne(b *testing.B, network string, tty, entrypoint bool, extra []string, image string, args ...string) bootSample {
	b.Helper()
	what := "boot"
	name, remove := benchRun(b, network, what, tty, extra, image, args...)
	defer func() {
		remove()
		// The next node starts on a quiet machine.
		time.Sleep(time.Second)
	}()
	// Without a tty systemd prints nothing to the log: its start is
	// "INFO: starting init", the entrypoint's last line.
	var lines []bootlog.Line
	err := benchWaitFor(name+": init started", func() (bool, error) {
		var err error
		if lines, err = benchLogs(name); err != nil {
			return false, err
		}
		boot := bootlog.ReadBoot(lines, entrypoint)
		if !boot.FirstInit.IsZero() || (!tty && !boot.StartingInit.IsZero()) {
			return true, nil
		}
		return false, benchExited(name)
	})
	if err != nil {
		b.Fatal(err)
	}
	state, err := benchWaitSystemd(name)
	if err != nil {
		b.Fatal(err)
	}
	if lines, err = benchLogs(name); err != nil {
		b.Fatal(err)
	}
	started, err := benchStartedAt(name)
	if err != nil {
		b.Fatal(err)
	}
	boot := bootlog.ReadBoot(lines, entrypoint)
	since := func(t time.Time) float64 {
		if t.IsZero() {
			return -1
		}
		return bootlog.Ms(t.Sub(started))
	}
	s := bootSample{
		Node:         name,
		StartingInit: since(boot.StartingInit),
		FirstInit:    since(boot.FirstInit),
		PreInit:      -1,
		KindReady:    since(boot.KindReady),
		FirstLine:    boot.FirstInitText,
		Fallback:     boot.Fallback,
		Lost:         boot.Lost,
		Systemd:      state,
	}
	if boot.PreInit >= 0 {
		s.PreInit = bootlog.Ms(boot.PreInit)
	}
	s.InitAfter = -1
	if !boot.FirstInit.IsZero() && !boot.StartingInit.IsZero() {
		s.InitAfter = bootlog.Ms(boot.FirstInit.Sub(boot.StartingInit))
	}
	if boot.KindReady.IsZero() && entrypoint {
		s.Lost = append(s.Lost, "the line kind waits for")
	}
	return s
}

// --- BenchmarkBootSteps -------------------------------------------------

var jsonPreInit = regexp.MustCompile(`"msg":"pre-init finished in ([0-9]+) ms"`)

// BenchmarkBootSteps boots b.N nodes of our binary with --log-format=json
// (no tty) and reports each step's median duration from its "step
// finished" lines: where the binary's own time goes on the real path.
func BenchmarkBootSteps(b *testing.B) {
	node, _, _, _ := benchImages(b)
	network := benchNetwork(b)
	durations := map[string][]time.Duration{}
	var order []string
	var preInit []time.Duration
	for b.Loop() {
		name, remove := benchRun(b, network, "steps", false,
			[]string{"--entrypoint", benchEntrypoint}, node, "--log-format", "json", benchInit)
		var lines []bootlog.Line
		err := benchWaitFor(name+": init started", func() (bool, error) {
			var err error
			if lines, err = benchLogs(name); err != nil {
				return false, err
			}
			for _, l := range lines {
				if strings.Contains(l.Text, `"msg":"starting init"`) {
					return true, nil
				}
			}
			return false, benchExited(name)
		})
		if err == nil {
			_, err = benchWaitSystemd(name)
		}
		remove()
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range bootlog.StepDurations(lines) {
			if _, ok := durations[st.Name]; !ok {
				order = append(order, st.Name)
			}
			durations[st.Name] = append(durations[st.Name], st.Duration)
		}
		for _, l := range lines {
			if m := jsonPreInit.FindStringSubmatch(l.Text); m != nil {
				v, _ := strconv.Atoi(m[1])
				preInit = append(preInit, time.Duration(v)*time.Millisecond)
			}
		}
		time.Sleep(time.Second)
	}
	b.ReportMetric(0, "ns/op")
	rec := map[string][]float64{}
	for _, name := range order {
		b.ReportMetric(bootlog.Ms(bootlog.Median(durations[name])), name+"-median-ms")
		for _, d := range durations[name] {
			rec[name] = append(rec[name], bootlog.Ms(d))
		}
	}
	b.ReportMetric(bootlog.Ms(bootlog.Median(preInit)), "pre-init-median-ms")
	benchRecord(b, rec)
}

// --- BenchmarkProgramsBeforeInit ---------------------------------------

// BenchmarkProgramsBeforeInit runs b.N nodes of each entrypoint under
// `strace -f` (strace -D keeps the entrypoint PID 1, so init is PID 1
// too) and counts the programs (successful execve) and processes it
// started before its execve of init; the entrypoint's own execve is not
// counted.
func BenchmarkProgramsBeforeInit(b *testing.B) {
	_, _, straceNode, straceReference := benchImages(b)
	network := benchNetwork(b)
	for _, v := range []struct{ name, image string }{
		{"entrypoint", straceNode},
		{"reference", straceReference},
	} {
		b.Run(v.name, func(b *testing.B) {
			type sample struct {
				Node      string   `json:"node"`
				Programs  []string `json:"programs"`
				Processes int      `json:"processes"`
			}
			var samples []sample
			for b.Loop() {
				name, remove := benchRun(b, network, "strace", true,
					[]string{"--entrypoint", "/usr/bin/strace"}, v.image,
					"-D", "-f", "-qq", "-e", "trace=execve,execveat,clone,clone3,fork,vfork",
					"-o", "/strace.log", benchEntrypoint, benchInit)
				var p bootlog.Programs
				err := benchWaitFor(name+": init exec'd", func() (bool, error) {
					out, err := dockerCmd(time.Minute, "exec", name, "cat", "/strace.log")
					if err != nil {
						return false, benchExited(name)
					}
					p, err = bootlog.CountPrograms(out, benchInit)
					return err == nil, nil
				})
				remove()
				if err != nil {
					b.Fatal(err)
				}
				samples = append(samples, sample{name, p.Execs, p.Processes})
			}
			benchRecord(b, samples)
			var progs, procs []float64
			for _, s := range samples {
				progs = append(progs, float64(len(s.Programs)))
				procs = append(procs, float64(s.Processes))
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(slices.Max(progs), "programs-max")
			b.ReportMetric(slices.Min(progs), "programs-min")
			b.ReportMetric(slices.Max(procs), "processes-max")
			b.Logf("programs of the last node: %s", strings.Join(samples[len(samples)-1].Programs, " "))
		})
	}
}

// --- BenchmarkPeakRSS ---------------------------------------------------

var (
	maxrssLine  = regexp.MustCompile(`maxrss-kib ([0-9]+) own-hwm-kib (-?[0-9]+)`)
	spawnerLine = regexp.MustCompile(`spawner-hwm-kib (-?[0-9]+)`)
	childLine   = regexp.MustCompile(`child-maxrss-kib ([0-9]+)`)
)

// BenchmarkPeakRSS measures the entrypoint's peak resident set size.
//
// In a node (the real boot path, every step applied): the entrypoint execs
// bench/maxrss instead of init; Linux carries the RSS high-water mark
// across execve, so getrusage(RUSAGE_SELF) there is the entrypoint's peak
// (not its children's). The container's first process exec'd runc's init
// before: so bench/maxrss --spawn is that process and starts the
// entrypoint as its child. The figure is valid when above what else that
// child's memory held (maxrss's own peak, the spawner's), which is
// checked. The same for the reference script (bash's own peak).
//
// --dry-run here and on every fake host: the child's peak from wait4
// (ru_maxrss), started by bench/maxrss --spawn (a child started from this
// test binary would count the test binary's peak: an exec from a vfork
// child folds the shared memory map's peak in). wait4 covers the child's
// own children too: here the iptables-save probes, a few MiB each, below
// the entrypoint's; the fake hosts start none.
func BenchmarkPeakRSS(b *testing.B) {
	node, reference, _, _ := benchImages(b)
	network := benchNetwork(b)
	probeDir := b.TempDir()
	probe := filepath.Join(probeDir, "maxrss")
	build := exec.Command("go", "build", "-trimpath", "-o", probe, "../../bench/maxrss")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build bench/maxrss: %v\n%s", err, out)
	}
	const probeIn = "/kind-bench-maxrss"
	for _, v := range []struct{ name, image string }{
		{"entrypoint/node", node},
		{"reference/node", reference},
	} {
		b.Run(v.name, func(b *testing.B) {
			var kib []float64
			for b.Loop() {
				name, remove := benchRun(b, network, "rss", true,
					[]string{"--restart=no", "--volume", probe + ":" + probeIn + ":ro", "--entrypoint", probeIn},
					v.image, "--spawn", benchEntrypoint, probeIn)
				if _, err := dockerCmd(benchWaitLimit, "wait", name); err != nil {
					remove()
					b.Fatal(err)
				}
				out, err := dockerCmd(time.Minute, "logs", name)
				remove()
				if err != nil {
					b.Fatal(err)
				}
				m := maxrssLine.FindStringSubmatch(out)
				if m == nil {
					b.Fatalf("%s: no maxrss line in:\n%s", name, out)
				}
				peak, _ := strconv.ParseFloat(m[1], 64)
				own, _ := strconv.ParseFloat(m[2], 64)
				if sm := spawnerLine.FindStringSubmatch(out); sm != nil {
					spawner, _ := strconv.ParseFloat(sm[1], 64)
					own = max(own, spawner)
				}
				if peak <= own {
					b.Fatalf("%s: ru_maxrss %v KiB is no more than maxrss's own peak (%v KiB): the entrypoint's is not above it", name, peak, own)
				}
				kib = append(kib, peak)
			}
			benchRecord(b, kib)
			benchReportRSS(b, kib)
		})
	}
	b.Run("entrypoint/dry-run-host", func(b *testing.B) {
		var kib []float64
		for b.Loop() {
			kib = append(kib, benchChildRSS(b, probe, benchBinary, "--dry-run"))
		}
		benchRecord(b, kib)
		benchReportRSS(b, kib)
	})
	b.Run("entrypoint/dry-run-fake-hosts", func(b *testing.B) {
		hosts, err := os.ReadDir(benchHosts)
		if err != nil {
			b.Fatal(err)
		}
		peak := map[string]float64{}
		var kib []float64
		for b.Loop() {
			top := 0.0
			for _, h := range hosts {
				k := benchChildRSS(b, probe, benchBinary, "--dry-run", "--root", filepath.Join(benchHosts, h.Name(), "root"))
				peak[h.Name()] = max(peak[h.Name()], k)
				top = max(top, k)
			}
			kib = append(kib, top)
		}
		benchRecord(b, peak)
		benchReportRSS(b, kib)
	})
}

func benchReportRSS(b *testing.B, kib []float64) {
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(slices.Max(kib)/1024, "peak-rss-max-MiB")
	b.ReportMetric(bootlog.Median(kib)/1024, "peak-rss-median-MiB")
}

// benchChildRSS runs argv under `probe --spawn` and returns its peak RSS
// in KiB. A dry run exits with a step's code when a step would fail (some
// fake hosts are made for that): that is not an error here.
func benchChildRSS(b *testing.B, probe string, argv ...string) float64 {
	b.Helper()
	cmd := exec.Command(probe, append([]string{"--spawn"}, argv...)...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		b.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	cm, sm := childLine.FindStringSubmatch(stderr.String()), spawnerLine.FindStringSubmatch(stderr.String())
	if cm == nil || sm == nil {
		b.Fatalf("%s: no maxrss lines in:\n%s", strings.Join(argv, " "), stderr.String())
	}
	child, _ := strconv.ParseFloat(cm[1], 64)
	spawner, _ := strconv.ParseFloat(sm[1], 64)
	if child <= spawner {
		b.Fatalf("%s: ru_maxrss %v KiB is no more than the spawner's peak (%v KiB)", strings.Join(argv, " "), child, spawner)
	}
	return child
}

// --- BenchmarkBinary ----------------------------------------------------

// BenchmarkBinary reports the binary's size and whether it is static (no
// program interpreter, no shared libraries).
func BenchmarkBinary(b *testing.B) {
	var size int64
	static := 0.0
	for b.Loop() {
		fi, err := os.Stat(benchBinary)
		if err != nil {
			b.Fatal(err)
		}
		size = fi.Size()
		f, err := elf.Open(benchBinary)
		if err != nil {
			b.Fatal(err)
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			b.Fatal(err)
		}
		static = 1
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				static = 0
			}
		}
		if len(libs) > 0 {
			static = 0
		}
		f.Close()
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(size), "bytes")
	b.ReportMetric(float64(size)/(1<<20), "MiB")
	b.ReportMetric(static, "static")
}
