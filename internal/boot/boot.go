package boot

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/userns"
)

// Host is what every step may use: the system, the environment, and the
// facts detected once for all steps.
type Host struct {
	Sys system.System
	// LookupEnv reads the entrypoint's environment (unset and empty differ:
	// KIND_DNS_SEARCH).
	LookupEnv func(string) (string, bool)
	// State is what Detect and the steps of the last Run or DryRun on h
	// detected.
	State State
	// Rand is what new identities (machine-id, product_uuid) are drawn
	// from; nil means crypto/rand. Tests pass a fixed stream so that plans
	// are stable.
	Rand io.Reader
	// ProbeTimeout limits each probe a step runs (an iptables-save, a name
	// lookup); 0 means the production limit, 5 s. Tests shorten it so that
	// a hanging probe is tested quickly.
	ProbeTimeout time.Duration
	// Executable is the binary the runtime units run (os.Executable of
	// a live run); "" means where kind's image has it.
	Executable string

	// probes are steps 9 and 10's slow probes (see network.Probes), new
	// for each Run or DryRun.
	probes *network.Probes
	// mounts is the mount table the steps read, parsed once per content,
	// new for each Run or DryRun.
	mounts *system.MountTable
	// ahead runs the commands steps start ahead of their turn (Step.Ahead),
	// new for each Run; nil in a dry run.
	ahead *plan.Ahead
}

// MountTable is the mount table of the last Run or DryRun on h: in a dry
// run read once, so that what check shows is what the steps planned from.
func (h *Host) MountTable() ([]*mountinfo.Info, error) {
	return h.mounts.Read(h.Sys)
}

// netProbes are this run's network probes; each group starts when its
// step's Prefetch or Plan first asks for it.
func (h *Host) netProbes() *network.Probes {
	if h.probes == nil {
		h.probes = network.NewProbes(h.Sys, cmp.Or(max(h.ProbeTimeout, 0), network.ProbeTimeout))
	}
	return h.probes
}

// stopProbes ends what beginRun started and still runs (cancel is its
// context's), so that nothing of a run outlives it: a capture archives
// what the run read, and init must not inherit a probe's process.
func (h *Host) stopProbes(cancel context.CancelFunc) {
	cancel()
	if h.probes != nil {
		h.probes.Wait()
	}
	if h.ahead != nil {
		h.ahead.Wait()
	}
}

// beginRun starts one Run or DryRun: it resets what a run keeps on h (the
// mount table, the probes) and starts every step's Prefetch, and, for a
// Run (apply), every step's Ahead; what they start stops with ctx (see
// stopProbes).
func beginRun(ctx context.Context, h *Host, steps []Step, apply bool) {
	// Nothing changes the mount table in a dry run: one read serves
	// every step (and check's rows).
	h.probes, h.mounts, h.ahead = nil, &system.MountTable{Fixed: !apply}, nil
	h.State = h.State.newRun()
	for _, s := range steps {
		if s.Prefetch != nil {
			s.Prefetch(ctx, h)
		}
	}
	if !apply {
		return
	}
	for _, s := range steps {
		if s.Ahead == nil {
			continue
		}
		if h.ahead == nil {
			h.ahead = plan.NewAhead(h.Sys)
		}
		h.ahead.Go(ctx, func() (plan.Action, bool) { return s.Ahead(ctx, h) })
	}
}

// applySys is what step s applies its actions through: for a step with an
// Ahead, one whose Run joins what its Ahead started.
func (h *Host) applySys(s Step) system.System {
	if s.Ahead != nil && h.ahead != nil {
		return h.ahead.System()
	}
	return h.Sys
}

// Getenv is LookupEnv without the distinction between unset and empty.
func (h *Host) Getenv(key string) string {
	v, _ := h.LookupEnv(key)
	return v
}

// Fact is one detected fact, shown by --dry-run.
type Fact struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Step is one step of the entrypoint.
type Step struct {
	Name string
	// Code is the exit status when the step fails.
	Code int
	// Plan detects what the step needs on h and decides what to do. An error
	// is fatal: the step cannot go on on this host.
	Plan func(ctx context.Context, h *Host) (Planned, error)
	// Prefetch, when set, starts the step's slow read-only probes before
	// step 1, so that they run while the steps before it work; Plan then
	// takes their answers. Only for probes that nothing an earlier step
	// does can change.
	Prefetch func(ctx context.Context, h *Host)
	// Ahead, when set, decides from its Prefetch's answers (and files no
	// earlier step touches) the command the step's plan will run first,
	// so that Run starts it before step 1 and it runs while the steps
	// before work (see plan.Ahead); the step's Apply then joins that run.
	// Only for a command whose input nothing an earlier step does can
	// change, and whose effect none of them can observe. ok false: start
	// nothing.
	Ahead func(ctx context.Context, h *Host) (act plan.Action, ok bool)
}

// Planned is what a step's Plan found and decided: the facts a dry run
// shows and the actions (what its Detect returned, typed, is in
// Host.State). A Plan that fails returns the actions that come before the
// failure.
type Planned struct {
	Facts   []Fact
	Actions []plan.Action
}

// StepError is a fatal failure of one step.
type StepError struct {
	Step string
	Code int
	Err  error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// Detect fills in the facts every step needs.
func Detect(sys system.System, lookupEnv func(string) (string, bool)) (*Host, error) {
	in, err := userns.InUserNS(sys)
	if err != nil {
		return nil, err
	}
	v2, err := cgroupfix.IsV2(sys)
	if err != nil {
		return nil, err
	}
	h := &Host{Sys: sys, LookupEnv: lookupEnv, State: State{UserNS: in, CgroupV2: v2}}
	// A replayed host (system.Tree) may fix its randomness, so that its
	// plan shows the same new identities every time.
	if r, ok := sys.(interface{ Rand() (io.Reader, error) }); ok {
		if h.Rand, err = r.Rand(); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Run applies every step in order, logging to log.
func Run(ctx context.Context, h *Host, steps []Step, log *logline.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	beginRun(ctx, h, steps, true)
	defer h.stopProbes(cancel) // a failed step leaves probes running
	for _, s := range steps {
		start := time.Now()
		slog := log.Step(s.Name)
		// A plan that fails returns the actions that come before the
		// failure (its log lines): they are applied, then the step stops.
		p, err := s.Plan(ctx, h)
		if applyErr := plan.Apply(ctx, h.applySys(s), slog, p.Actions, h.State.UserNS); err == nil {
			err = applyErr
		}
		if err != nil {
			return &StepError{Step: s.Name, Code: s.Code, Err: err}
		}
		slog.Done(time.Since(start))
	}
	return nil
}

// Result is one step's outcome in a dry run.
type Result struct {
	Step    string
	Facts   []Fact
	Actions []plan.Action
	Err     error
}

// DryRun detects and plans every step, changing nothing. It stops at the
// first step that would be fatal; that error is returned too.
func DryRun(ctx context.Context, h *Host, steps []Step) ([]Result, error) {
	return dryRun(ctx, h, steps, false)
}

// dryRun is DryRun; every: plan the steps after a fatal one too.
func dryRun(ctx context.Context, h *Host, steps []Step, every bool) ([]Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	beginRun(ctx, h, steps, false)
	defer h.stopProbes(cancel)
	var results []Result
	var first error
	for _, s := range steps {
		p, err := s.Plan(ctx, h)
		if err == nil {
			// What the apply would stop at, the dry run says.
			err = plan.Preflight(h.Sys, p.Actions)
		}
		results = append(results, Result{Step: s.Name, Facts: p.Facts, Actions: p.Actions, Err: err})
		if err != nil && first == nil {
			first = &StepError{Step: s.Name, Code: s.Code, Err: err}
		}
		if first != nil && !every {
			break
		}
	}
	return results, first
}

// Dry is one dry run of some steps on a host, from Detect on: what
// --dry-run prints, what check builds its rows from, and what capture
// records. One function makes it for every command: DryRunOn.
type Dry struct {
	// Host is nil when Detect failed: DetectErr says why, and no step
	// ran.
	Host      *Host
	DetectErr error
	Results   []Result
	// Err is the first fatal step's *StepError.
	Err error
}

// DryRunOptions say how DryRunOn runs.
type DryRunOptions struct {
	// ProbeTimeout is Host.ProbeTimeout.
	ProbeTimeout time.Duration
	// Every plans the steps after a fatal one too, each on the host as
	// it is (a dry run changes nothing), so that every step's facts are
	// known (check); Shown still ends at the fatal step.
	Every bool
}

// DryRunOn detects the host's shared facts on sys, then dry-runs steps.
func DryRunOn(ctx context.Context, sys system.System, lookupEnv func(string) (string, bool), steps []Step, o DryRunOptions) Dry {
	h, err := Detect(sys, lookupEnv)
	if err != nil {
		return Dry{DetectErr: err}
	}
	h.ProbeTimeout = o.ProbeTimeout
	results, err := dryRun(ctx, h, steps, o.Every)
	return Dry{Host: h, Results: results, Err: err}
}

// Shown is what --dry-run shows: the results up to the first fatal step.
func (d Dry) Shown() []Result {
	for i, r := range d.Results {
		if r.Err != nil {
			return d.Results[:i+1]
		}
	}
	return d.Results
}

// State is what the dry run detected: nil when Detect failed.
func (d Dry) State() *State {
	if d.Host == nil {
		return nil
	}
	return &d.Host.State
}

// Render is Render of Shown.
func (d Dry) Render(w io.Writer) error { return Render(w, d.Host, d.Shown()) }

// Render prints a dry run: the shared facts, then each step with its facts
// and its actions, one per line.
func Render(w io.Writer, h *Host, results []Result) error {
	// Buffered, not built whole: the plan of a host of 50k cgroup mounts
	// is hundreds of MiB of text to hold.
	b := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(b, "facts:\n  user namespace: %t\n  cgroup: %s\n", h.State.UserNS, cgroupName(h.State.CgroupV2))
	for i, r := range results {
		fmt.Fprintf(b, "step %d %s:\n", i+1, r.Step)
		for _, f := range r.Facts {
			fmt.Fprintf(b, "  fact %s: %s\n", logline.Escape(f.Name), factValue(f.Value))
		}
		for _, a := range r.Actions {
			fmt.Fprintf(b, "  %s\n", a)
		}
		if r.Err != nil {
			fmt.Fprintf(b, "  FATAL: %s\n", logline.Escape(r.Err.Error()))
		} else if len(r.Actions) == 0 {
			b.WriteString("  (nothing to do)\n")
		}
	}
	return b.Flush()
}

// maxFact is the longest fact value a dry run prints in full.
const maxFact = 300

// factValue makes a detected value safe for one line (logline.Escape):
// facts come from files and the environment, and a newline there must not
// forge a plan line, nor a 10 MB file make a 10 MB line.
func factValue(v string) string {
	if len(v) > maxFact {
		return logline.Escape(v[:maxFact]) + "… (clipped)"
	}
	return logline.Escape(v)
}

func cgroupName(v2 bool) string {
	if v2 {
		return "v2"
	}
	return "v1"
}

// ExitCode is the process exit status for an error from Run or DryRun.
func ExitCode(err error) int {
	if se, ok := errors.AsType[*StepError](err); ok {
		return se.Code
	}
	if err != nil {
		return 1
	}
	return 0
}

// JSONReport is the --dry-run --log-format=json form of Shown.
func (d Dry) JSONReport() any {
	type step struct {
		Step    string        `json:"step"`
		Facts   []Fact        `json:"facts,omitempty"`
		Actions []plan.Action `json:"actions"`
		Error   string        `json:"error,omitempty"`
	}
	report := struct {
		UserNS bool   `json:"user_namespace"`
		Cgroup string `json:"cgroup"`
		Steps  []step `json:"steps"`
	}{UserNS: d.Host.State.UserNS, Cgroup: cgroupName(d.Host.State.CgroupV2)}
	for _, r := range d.Shown() {
		s := step{Step: r.Step, Facts: r.Facts, Actions: r.Actions}
		if s.Actions == nil {
			s.Actions = []plan.Action{}
		}
		if r.Err != nil {
			s.Error = r.Err.Error()
		}
		report.Steps = append(report.Steps, s)
	}
	return report
}
