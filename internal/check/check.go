package check

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Status is a row's verdict.
type Status string

const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Row is one requirement.
type Row struct {
	Name     string `json:"name"`
	Status   Status `json:"status"`
	Observed string `json:"observed"`
	Hint     string `json:"hint"`
}

// Exit codes: the worst status of the rows.
const (
	ExitPass = 0
	ExitWarn = 1
	ExitFail = 2
	// ExitUsage: check could not run (bad flags, no such --root).
	ExitUsage = 3
)

// ExitCode is the exit code of the worst status of rows.
func ExitCode(rows []Row) int {
	code := ExitPass
	for _, r := range rows {
		switch r.Status {
		case Fail:
			return ExitFail
		case Warn:
			code = ExitWarn
		}
	}
	return code
}

// Options say what to check.
type Options struct {
	// Sys is the host: system.Linux, a system.Tree for --root, or a
	// capture.Recorder over either (a capture records what the rows read).
	Sys       system.System
	LookupEnv func(string) (string, bool)
	// Live: Sys is this machine, not a replayed tree; /dev/fuse must then
	// be a character device, not just exist.
	Live bool
	// PodNetwork, when set, runs the pod-network preflight
	// (podnet.Preflight): a summary, or why it failed.
	PodNetwork func(ctx context.Context) (string, error)
	// DNSProbe, when set, sends one query to the DNS forwarder at server
	// (dnsforward.Probe) on a booted node that runs it.
	DNSProbe func(ctx context.Context, server netip.AddrPort, name string) (time.Duration, error)
	// ProbeTimeout limits each probe; 0 means the entrypoint's 5 s.
	ProbeTimeout time.Duration
}

// Report is a check's outcome.
type Report struct {
	Rows []Row
	// Dry is the one dry run the rows were built from (every step
	// planned, even after a fatal one): what capture archives as the
	// host's plan.
	Dry boot.Dry
}

// Run checks the host. It never fails: what cannot be read is a row.
func Run(ctx context.Context, o Options) Report {
	timeout := o.ProbeTimeout
	if timeout <= 0 {
		timeout = network.ProbeTimeout
	}
	c := &checker{sys: o.Sys, live: o.Live, timeout: timeout}
	rep := Report{Dry: boot.DryRunOn(ctx, o.Sys, o.LookupEnv, boot.Steps(), boot.DryRunOptions{ProbeTimeout: o.ProbeTimeout, Every: true})}
	if err := rep.Dry.DetectErr; err != nil {
		rep.Rows = []Row{{"detect", Fail, err.Error(),
			"the entrypoint cannot tell the user namespace or the cgroup version: fix the file named"}}
	} else {
		c.st, c.results = &rep.Dry.Host.State, rep.Dry.Results
		c.mi, c.miErr = rep.Dry.Host.MountTable()
		_, err := c.sys.Stat("/kind")
		c.kind = err == nil
		comm, _ := c.sys.ReadFile("/proc/1/comm", system.LimitValue)
		c.booted = c.kind && strings.TrimSpace(string(comm)) == "systemd"
		// One list, read in its order (calls are evaluated left to right).
		rep.Rows = slices.Concat(
			[]Row{c.userNS(), c.cgroupVersion(), c.kubeletCgroup(), c.cgroupNS(), c.controllers(), c.cgroupMounts(), c.nofile(),
				c.inotify(), c.keys()},
			c.storage(), []Row{c.containerdNofile(), c.sysMount(), c.propagation()}, c.iptables(), c.names(), c.etcdPeers(),
			[]Row{c.dnsForwarder(ctx, o.DNSProbe), c.dmi(), c.libModules(), c.kernelModules()},
			[]Row{c.plan(rep.Dry.Shown(), rep.Dry.Err)})
	}
	if o.PodNetwork != nil {
		rep.Rows = append(rep.Rows, c.podNetwork(ctx, o.PodNetwork))
	}
	return rep
}

type checker struct {
	sys     system.System
	live    bool
	timeout time.Duration
	// st is what the dry run detected, which the rows show; results,
	// what its steps planned.
	st      *boot.State
	results []boot.Result
	mi      []*mountinfo.Info
	miErr   error
	// kind: /kind exists (a node image); booted: and systemd is PID 1,
	// so the entrypoint has run.
	kind, booted bool
}

// unreadableHint is the hint of a row whose input could not be read at
// all: what it says is that error, not a finding about the host.
const unreadableHint = "the entrypoint cannot get past this either: fix what the error names (entrypoint --dry-run shows where it stops)"

// failRows are the rows names, each failing with err: what a group of
// rows says when the facts they all come from could not be detected.
// Every row is there still, so a host that cannot be read has the rows,
// in order, of one that can.
func failRows(err error, hint string, names ...string) []Row {
	rows := make([]Row, 0, len(names))
	for _, n := range names {
		rows = append(rows, Row{n, Fail, err.Error(), hint})
	}
	return rows
}

// tableRow is the row named name of a check that reads the mount table,
// when the table could not be read: "nothing mounted" would blame the
// host for a file that could not be used.
func (c *checker) tableRow(name string) (Row, bool) {
	if c.miErr == nil {
		return Row{}, false
	}
	return Row{name, Fail, c.miErr.Error(), unreadableHint}, true
}

// mountAt is the mount on top at p, which the row named name looks at;
// or, with false, the failing row instead: the mount table could not be
// read (tableRow), or nothing is mounted at p (hint says what to do).
func (c *checker) mountAt(name, p, hint string) (*mountinfo.Info, Row, bool) {
	if r, ok := c.tableRow(name); ok {
		return nil, r, false
	}
	m := system.Top(c.mi, p)
	if m == nil {
		return nil, Row{name, Fail, "nothing mounted at " + p, hint}, false
	}
	return m, Row{}, true
}

// plan is the row of the dry run: would the entrypoint get to init?
func (c *checker) plan(results []boot.Result, planErr error) Row {
	const name = "plan"
	var se *boot.StepError
	if errors.As(planErr, &se) {
		return Row{name, Fail, fmt.Sprintf("step %s would stop the entrypoint (exit %d): %v", se.Step, se.Code, se.Err),
			"entrypoint --dry-run shows the whole plan"}
	}
	if planErr != nil {
		return Row{name, Fail, planErr.Error(), "entrypoint --dry-run shows the whole plan"}
	}
	changes := 0
	var warnings []string
	for _, r := range results {
		changes += plan.CountChanges(r.Actions)
		for _, a := range r.Actions {
			if a.Op == plan.OpLog && (a.Level == logline.Warn || a.Level == logline.Error) {
				warnings = append(warnings, fmt.Sprintf("%s: %s: %s", r.Step, a.Level, a.Data))
			}
		}
	}
	obs := fmt.Sprintf("%d steps, %d changes to make", len(results), changes)
	if len(warnings) > 0 {
		return Row{name, Warn, obs + "; " + joinClipped(warnings, "; "),
			"the rows above say why; entrypoint --dry-run shows the whole plan"}
	}
	return Row{name, Pass, obs, ""}
}
