package main

// This file holds the report's sections, one function each.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func writeHeader(w io.Writer, commit, docker, load, goVersion string) {
	var u unix.Utsname
	_ = unix.Uname(&u)
	kernel := unix.ByteSliceToString(u.Release[:])
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	fmt.Fprintf(w, "# Benchmark results\n\n")
	fmt.Fprintf(w, "Written by `make bench` (bench/run.sh) on %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "| machine | |\n|---|---|\n")
	fmt.Fprintf(w, "| CPUs (nproc) | %d |\n| CPU model | %s |\n| kernel | %s |\n", runtime.NumCPU(), cpu, kernel)
	if load != "" {
		fmt.Fprintf(w, "| load average (1, 5, 15 min; the machine is shared) | %s |\n", load)
	}
	fmt.Fprintf(w, "| Go | %s |\n", goVersion)
	if docker != "" {
		fmt.Fprintf(w, "| Docker engine | %s |\n", docker)
	}
	if commit != "" {
		fmt.Fprintf(w, "| commit | `%s` |\n", commit)
	}
	fmt.Fprintln(w)
}

// ms formats a metric in milliseconds, "–" when there is none.
func ms(r result, ok bool, unit string) string {
	v, ok := metric(r, ok, unit)
	if !ok {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
}

// metric is the metric unit of r, when r was found (ok) and has it.
func metric(r result, ok bool, unit string) (float64, bool) {
	if !ok {
		return 0, false
	}
	v, ok := r.metrics[unit]
	return v, ok
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func writeRequirements(w io.Writer, mrs, ers []result, det map[string]json.RawMessage) {
	fmt.Fprintf(w, "## Requirements (issue #6)\n\n| what | target | measured | met |\n|---|---|---|---|\n")
	tty, tok := find(ers, "BenchmarkBoot/entrypoint/tty")
	notty, nok := find(ers, "BenchmarkBoot/entrypoint/no-tty")
	base, bok := find(ers, "BenchmarkBoot/init-only/tty")
	ref, rok := find(ers, "BenchmarkBoot/reference/tty")
	if fi, ok := metric(tty, tok, "first-init-median-ms"); ok {
		b, _ := metric(base, bok, "first-init-median-ms")
		settle, _ := metric(tty, tok, "settle-ms")
		over := fi - b
		refNote := ""
		if rfi, ok := metric(ref, rok, "first-init-median-ms"); ok {
			refNote = fmt.Sprintf("; reference script: %.1f ms", rfi-b)
		}
		settleNote := ""
		if settle > 0 {
			settleNote = fmt.Sprintf(", of which %.0f ms is the tty settle", settle)
		}
		fmt.Fprintf(w, "| start-up overhead, median, kind's flags (`--tty`, default `--tty-settle=%.0fms`): init's first line − StartedAt, less the same with init started directly (%.1f ms) | ≤ 20 ms | %.1f ms%s%s | %s |\n",
			settle, b, over, settleNote, refNote, yes(over <= 20))
		if s, ok := find(ers, "BenchmarkBoot/entrypoint/tty-settle-100ms"); ok {
			if v, ok := s.metrics["first-init-median-ms"]; ok {
				fmt.Fprintf(w, "| the same with `--tty-settle=100ms` (every line reaches the log, even on a loaded host) | – | %.1f ms | |\n", v-b)
			}
		}
	}
	if si, ok := metric(notty, nok, "starting-init-median-ms"); ok {
		refNote := ""
		if r, ok := find(ers, "BenchmarkBoot/reference/no-tty"); ok {
			if v, ok := r.metrics["starting-init-median-ms"]; ok {
				refNote = fmt.Sprintf(" (reference script: %.1f ms)", v)
			}
		}
		fmt.Fprintf(w, "| start-up overhead, median, without `--tty` (no settle; systemd prints nothing there): \"INFO: starting init\" − StartedAt | ≤ 20 ms | %.1f ms%s | %s |\n", si, refNote, yes(si <= 20))
	}
	if pi, ok := metric(tty, tok, "pre-init-median-ms"); ok {
		pn, _ := metric(notty, nok, "pre-init-median-ms")
		fmt.Fprintf(w, "| the binary's own time, median (\"pre-init finished in N ms\"), `--tty` / without | – | %.1f ms / %.1f ms | |\n", pi, pn)
	}
	if p, ok := find(ers, "BenchmarkProgramsBeforeInit/entrypoint"); ok {
		refNote := ""
		if r, ok := find(ers, "BenchmarkProgramsBeforeInit/reference"); ok {
			refNote = fmt.Sprintf(" (reference script: %.0f)", r.metrics["programs-max"])
		}
		fmt.Fprintf(w, "| programs started before init, default node (most of any run) | ≤ 8 | %.0f%s | %s |\n", p.metrics["programs-max"], refNote, yes(p.metrics["programs-max"] <= 8))
	}
	if b, ok := find(ers, "BenchmarkBinary"); ok {
		static := b.metrics["static"] == 1
		kind := "static"
		if !static {
			kind = "**not static**"
		}
		fmt.Fprintf(w, "| binary size (`make build`: -trimpath, -s -w) | ≤ 8 MiB, static | %.2f MiB (%.0f bytes), %s | %s |\n", b.metrics["MiB"], b.metrics["bytes"], kind, yes(static && b.metrics["MiB"] <= 8))
	}
	for _, c := range []struct{ name, what string }{
		{"BenchmarkPeakRSS/entrypoint/node", "peak RSS, real boot path in a node"},
		{"BenchmarkPeakRSS/entrypoint/dry-run-host", "peak RSS, `--dry-run` on this host"},
		{"BenchmarkPeakRSS/entrypoint/dry-run-fake-hosts", "peak RSS, `--dry-run --root` of every fake host"},
	} {
		if r, ok := find(ers, c.name); ok {
			v := r.metrics["peak-rss-max-MiB"]
			fmt.Fprintf(w, "| %s (most of any run) | ≤ 20 MiB | %.1f MiB | %s |\n", c.what, v, yes(v <= 20))
		}
	}
	if len(mrs) > 0 {
		slow, slowName, allocs, allocName := 0.0, "", 0.0, ""
		for _, r := range mrs {
			name, ok := strings.CutPrefix(r.name, "BenchmarkDetectPlan/")
			if !ok {
				continue
			}
			if v := r.metrics["ns/op"]; v > slow {
				slow, slowName = v, name
			}
			if v := r.metrics["allocs/op"]; v > allocs {
				allocs, allocName = v, name
			}
		}
		if slowName != "" {
			fmt.Fprintf(w, "| Detect+Plan of the slowest fake host (a hanging probe's apart, below) | < 1 ms | %.0f µs (%s) | %s |\n", slow/1000, slowName, yes(slow < 1e6))
			fmt.Fprintf(w, "| Detect+Plan allocations, most of any fake host | < 500 | %.0f (%s) | %s |\n", allocs, allocName, yes(allocs < 500))
		}
	}
	fmt.Fprintln(w)
}

// under returns the results of one benchmark's sub-benchmarks (prefix
// "BenchmarkX/"), in order.
func under(rs []result, prefix string) []result {
	var out []result
	for _, r := range rs {
		if strings.HasPrefix(r.name, prefix) {
			out = append(out, r)
		}
	}
	return out
}

func writeBoot(w io.Writer, ers []result) {
	rows := under(ers, "BenchmarkBoot/")
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Boot: nodes started one after another (BenchmarkBoot)\n\n")
	fmt.Fprintf(w, "Times from the container's StartedAt (`docker inspect`) to log lines (`docker logs -t`), median / max over the nodes.\n\n")
	fmt.Fprintf(w, "| variant | nodes | init's first line | \"INFO: starting init\" | from \"INFO: starting init\" to init's first line | pre-init (binary's own) | tty settle | line kind waits for | nodes with lost lines |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		pair := func(unit string) string {
			a, b := ms(r, true, unit+"-median-ms"), ms(r, true, unit+"-max-ms")
			if a == "–" {
				return "–"
			}
			return a + " / " + b
		}
		settle := "–"
		if v, ok := r.metrics["settle-ms"]; ok {
			settle = strconv.FormatFloat(v, 'f', 0, 64) + " ms"
		}
		lost := "–"
		if v, ok := r.metrics["lost-lines-nodes"]; ok {
			lost = strconv.FormatFloat(v, 'f', 0, 64)
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(r.name, "BenchmarkBoot/"), r.metrics["nodes"],
			pair("first-init"), pair("starting-init"), pair("init-after-starting-init"), pair("pre-init"), settle, pair("kind-ready"), lost)
	}
	fmt.Fprintln(w)
}

// stepOrder is the entrypoint's steps, in order (internal/boot/steps.go).
var stepOrder = []string{"validate_userns", "configure_containerd", "configure_proxy", "fix_mount", "fix_cgroup",
	"fix_machine_id", "fix_product_name", "fix_product_uuid", "select_iptables", "enable_network_magic"}

func writeSteps(w io.Writer, ers []result) {
	r, ok := find(ers, "BenchmarkBootSteps")
	if !ok {
		return
	}
	fmt.Fprintf(w, "## Where the binary's time goes (BenchmarkBootSteps)\n\n")
	fmt.Fprintf(w, "%d nodes of our binary with `--log-format json`, no tty: each step's median duration (its \"step finished\" line). enable_network_magic's iptables-restore starts before step 1 (docs/performance.md), so the step's time is only what it still had to wait for.\n\n| step | median |\n|---|---|\n", r.n)
	sum := 0.0
	for _, st := range stepOrder {
		if v, ok := r.metrics[st+"-median-ms"]; ok {
			sum += v
			fmt.Fprintf(w, "| %s | %.1f ms |\n", st, v)
		}
	}
	fmt.Fprintf(w, "| sum of the medians | %.1f ms |\n| pre-init (median) | %.1f ms |\n\n", sum, r.metrics["pre-init-median-ms"])
}

func writePrograms(w io.Writer, ers []result, det map[string]json.RawMessage) {
	rows := under(ers, "BenchmarkProgramsBeforeInit/")
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Programs before init (BenchmarkProgramsBeforeInit, strace -f)\n\n| entrypoint | programs (execve) | processes | programs of the last node |\n|---|---|---|---|\n")
	for _, r := range rows {
		name := strings.TrimPrefix(r.name, "BenchmarkProgramsBeforeInit/")
		progs := fmt.Sprintf("%.0f", r.metrics["programs-max"])
		if r.metrics["programs-min"] != r.metrics["programs-max"] {
			progs = fmt.Sprintf("%.0f–%.0f", r.metrics["programs-min"], r.metrics["programs-max"])
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s |\n", name, progs, r.metrics["processes-max"], programList(det[r.name]))
	}
	fmt.Fprintln(w)
}

// programList summarises the last sample's programs: base names with
// counts, in first-seen order.
func programList(raw json.RawMessage) string {
	var samples []struct {
		Programs []string `json:"programs"`
	}
	if json.Unmarshal(raw, &samples) != nil || len(samples) == 0 {
		return "–"
	}
	count := map[string]int{}
	var order []string
	for _, p := range samples[len(samples)-1].Programs {
		b := p[strings.LastIndex(p, "/")+1:]
		if count[b] == 0 {
			order = append(order, b)
		}
		count[b]++
	}
	var parts []string
	for _, b := range order {
		if count[b] > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", b, count[b]))
		} else {
			parts = append(parts, b)
		}
	}
	return strings.Join(parts, ", ")
}

func writeRSS(w io.Writer, ers []result, det map[string]json.RawMessage) {
	rows := under(ers, "BenchmarkPeakRSS/")
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "## Peak RSS (BenchmarkPeakRSS)\n\n| what | runs | median | max |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %.1f MiB | %.1f MiB |\n", strings.TrimPrefix(r.name, "BenchmarkPeakRSS/"), r.n, r.metrics["peak-rss-median-MiB"], r.metrics["peak-rss-max-MiB"])
	}
	var peaks map[string]float64
	if json.Unmarshal(det["BenchmarkPeakRSS/entrypoint/dry-run-fake-hosts"], &peaks) == nil && len(peaks) > 0 {
		top, topName := 0.0, ""
		for k, v := range peaks {
			if v > top {
				top, topName = v, k
			}
		}
		fmt.Fprintf(w, "\nLargest of the fake hosts: %s, %.1f MiB.\n", topName, top/1024)
	}
	fmt.Fprintln(w)
}

func writeDetectPlan(w io.Writer, mrs []result) {
	var dp, hang []result
	mi := map[string]result{}
	for _, r := range mrs {
		switch {
		case strings.HasPrefix(r.name, "BenchmarkDetectPlan/"):
			dp = append(dp, r)
		case strings.HasPrefix(r.name, "BenchmarkDetectPlanProbeTimeout/"):
			hang = append(hang, r)
		case strings.HasPrefix(r.name, "BenchmarkReadMountinfo/"):
			mi[strings.TrimPrefix(r.name, "BenchmarkReadMountinfo/")] = r
		}
	}
	if len(dp) == 0 {
		return
	}
	fmt.Fprintf(w, "## Detect+Plan of every fake host (internal/boot BenchmarkDetectPlan)\n\n")
	fmt.Fprintf(w, "`Detect` and `DryRun` of all ten steps on `testdata/hosts/*/root` through `system.Tree`, commands from the hosts' recorded outputs; the median of %d runs (`-count`; the machine is shared, times vary). The last column is one read and parse of the host's mountinfo (BenchmarkReadMountinfo): fix_mount and fix_cgroup (v1) each do one, and identity's two steps one each.\n\n", dp[0].runs)
	fmt.Fprintf(w, "| fake host | µs/op | B/op | allocs/op | mountinfo read+parse allocs |\n|---|---|---|---|---|\n")
	slices.SortFunc(dp, func(a, b result) int { return int(b.metrics["allocs/op"] - a.metrics["allocs/op"]) })
	for _, r := range dp {
		name := strings.TrimPrefix(r.name, "BenchmarkDetectPlan/")
		m := "–"
		if x, ok := mi[name]; ok {
			m = fmt.Sprintf("%.0f", x.metrics["allocs/op"])
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %s |\n", name, r.metrics["ns/op"]/1000, r.metrics["B/op"], r.metrics["allocs/op"], m)
	}
	for _, r := range hang {
		fmt.Fprintf(w, "\nWith a hanging probe (BenchmarkDetectPlanProbeTimeout), waiting for the tests' 150 ms probe timeout: %s, %.1f ms/op, %.0f allocs/op.\n",
			strings.TrimPrefix(r.name, "BenchmarkDetectPlanProbeTimeout/"), r.metrics["ns/op"]/1e6, r.metrics["allocs/op"])
	}
	fmt.Fprintln(w)
}

func writeDefinitions(w io.Writer) {
	fmt.Fprint(w, `## Definitions

- **node image**: every boot benchmark, ours and the reference's, boots `+"`kind-entrypoint-bench/node:dev`"+`: the e2e tier's node image with Debian's default iptables alternatives (nft, as kind's base image has them). The e2e image itself points them at legacy, so that the e2e tier sees select_iptables switch them; on an nft host (this one) a default node switches nothing.
- **StartedAt**: `+"`docker inspect -f {{.State.StartedAt}}`"+`, set by dockerd once the container's task has started. It comes a few ms after the container's first process started (the entrypoint logs before it), so the times below are a little short of the time from the process's start; starting init directly measures that offset (row init-only: systemd's first line is logged about when StartedAt is).
- **Line times**: `+"`docker logs -t`"+`, when Docker read the line from the container's tty or pipe.
- **init's first line**: the first non-blank line after `+"`INFO: starting init`"+`, i.e. systemd's banner ("systemd 252... running in system mode"); if `+"`INFO: starting init`"+` was lost (systemd's tcflush of /dev/console drops what Docker has not read yet), systemd's banner line. Only with `+"`--tty`"+`: without a console, systemd as PID 1 in a container prints nothing to the container's log (its early messages are not in the journal either), so without a tty init's start is taken as the entrypoint's last line, `+"`INFO: starting init`"+`, written just before the execve.
- **start-up overhead**: with `+"`--tty`"+`, the median of (init's first line − StartedAt) less the same median with /sbin/init as the container's entrypoint (no entrypoint at all); without a tty, the median of ("INFO: starting init" − StartedAt).
- **pre-init**: the binary's own "INFO: pre-init finished in N ms" (from the start of main to the end of the last step).
- **tty settle**: `+"`--tty-settle`"+` (default logline.TTYSettle, 0), the time the binary waits after its last line before the execve when its log is a terminal, so that systemd's tcflush of /dev/console cannot drop the last lines (docs/performance.md, "The last lines on a tty"). Without a tty it does not wait.
- **line kind waits for**: kind's CLI regexp `+"`Reached target .*Multi-User System.*|detected cgroup v1`"+`.
- **nodes with lost lines**: nodes whose log lacks "INFO: starting init" or the line kind waits for.
- **programs**: successful execve calls in `+"`strace -D -f`"+` of the node's entrypoint after its own execve and before the execve of /sbin/init (strace -D keeps the entrypoint, and then init, PID 1). **processes**: clone/clone3 without CLONE_THREAD, fork and vfork before init's execve (ours has one more than programs: Go's os package starts a child that exits at once to learn whether the kernel has pidfds).
- **peak RSS in a node**: the entrypoint, started by `+"`bench/maxrss --spawn`"+` (the container's first process was runc's init, whose peak would count otherwise), runs every step and execs `+"`bench/maxrss`"+` instead of init; Linux keeps the RSS high-water mark across execve, so getrusage(RUSAGE_SELF) there is the entrypoint's peak, without its children. **--dry-run**: wait4's ru_maxrss of `+"`entrypoint --dry-run`"+` started by `+"`bench/maxrss --spawn`"+` (also covers its children: the iptables-save probes, a few MiB each).
`)
}
