package bootlog

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// StartingInit is the entrypoint's last line before it execs init (the
// reference script's too).
const StartingInit = "INFO: starting init"

var (
	// kindReady is what kind's CLI waits for in a node's log
	// (pkg/cluster/internal/providers/docker/provision.go, v0.23.0).
	kindReady = regexp.MustCompile(`Reached target .*Multi-User System.*|detected cgroup v1`)
	// systemdBanner is systemd's first output as PID 1 ("systemd 252.39-1~deb12u2
	// running in system mode (+PAM ...").
	systemdBanner = regexp.MustCompile(`^systemd [0-9][^ ]* running in system mode`)
	preInit       = regexp.MustCompile(`^INFO: pre-init finished in ([0-9]+) ms$`)
)

// Line is one line of `docker logs -t`.
type Line struct {
	Time time.Time
	Text string // without the line end (and without a tty's '\r')
}

// ParseDockerLogs parses `docker logs -t` output: each line is an
// RFC 3339 timestamp with nanoseconds, a space, and what the container
// wrote.
func ParseDockerLogs(out string) ([]Line, error) {
	var lines []Line
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		stamp, text, ok := strings.Cut(l, " ")
		if !ok {
			stamp, text = l, ""
		}
		t, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			return nil, fmt.Errorf("docker logs line %d: %w", i+1, err)
		}
		lines = append(lines, Line{Time: t, Text: strings.TrimRight(text, "\r")})
	}
	return lines, nil
}

// Boot is what one node's log tells about its start.
type Boot struct {
	// StartingInit is when the "INFO: starting init" line was logged
	// (zero when there is none: init started directly, or the line was
	// lost, see Lost).
	StartingInit time.Time
	// FirstInit is when init's first line was logged: the first non-blank
	// line after "INFO: starting init", which is systemd's banner
	// ("systemd 252... running in system mode"). When "INFO: starting init"
	// is missing it is the banner line, and Fallback is set. Zero when
	// init printed nothing (no tty: systemd has no console to print to).
	FirstInit     time.Time
	FirstInitText string
	Fallback      bool
	// PreInit is what the entrypoint logged as "pre-init finished in N ms";
	// -1 when there is no such line (the reference script, or lost).
	PreInit time.Duration
	// KindReady is when the first line kind's CLI waits for was logged
	// ("detected cgroup v1" on v1, systemd's "Reached target ...
	// Multi-User System" otherwise); zero when there is none.
	KindReady time.Time
	// Lost lists the entrypoint lines expected but missing from the log
	// (systemd's tcflush of the console drops what Docker has not read).
	Lost []string
}

// ReadBoot reads a node's log. viaEntrypoint says whether an entrypoint
// ran before init (else init's first line is the log's first line);
// expect are entrypoint lines that must be there (they are reported in
// Lost when they are not).
func ReadBoot(lines []Line, viaEntrypoint bool, expect ...string) Boot {
	b := Boot{PreInit: -1}
	afterStart := !viaEntrypoint
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l.Text] = true
		if m := preInit.FindStringSubmatch(l.Text); m != nil && b.PreInit < 0 {
			ms, _ := strconv.Atoi(m[1])
			b.PreInit = time.Duration(ms) * time.Millisecond
		}
		if b.KindReady.IsZero() && kindReady.MatchString(l.Text) {
			b.KindReady = l.Time
		}
		switch {
		case viaEntrypoint && l.Text == StartingInit && b.StartingInit.IsZero():
			b.StartingInit, afterStart = l.Time, true
		case afterStart && b.FirstInit.IsZero() && strings.TrimSpace(l.Text) != "":
			b.FirstInit, b.FirstInitText = l.Time, l.Text
		}
	}
	if viaEntrypoint && b.StartingInit.IsZero() {
		for _, l := range lines {
			if systemdBanner.MatchString(l.Text) {
				b.FirstInit, b.FirstInitText, b.Fallback = l.Time, l.Text, true
				break
			}
		}
	}
	if viaEntrypoint && !seen[StartingInit] {
		b.Lost = append(b.Lost, StartingInit)
	}
	for _, e := range expect {
		if !seen[e] {
			b.Lost = append(b.Lost, e)
		}
	}
	return b
}

// Step is one step's duration from the entrypoint's JSON log.
type Step struct {
	Name     string
	Duration time.Duration
}

// StepDurations reads the "step finished" lines of a --log-format=json log,
// in order.
func StepDurations(lines []Line) []Step {
	var out []Step
	for _, l := range lines {
		if !strings.HasPrefix(l.Text, "{") {
			continue
		}
		var j struct {
			Step       string  `json:"step"`
			Msg        string  `json:"msg"`
			DurationMS float64 `json:"duration_ms"`
		}
		if json.Unmarshal([]byte(l.Text), &j) != nil || j.Msg != "step finished" || j.Step == "" {
			continue
		}
		out = append(out, Step{j.Step, time.Duration(j.DurationMS * float64(time.Millisecond))})
	}
	return out
}

// Programs is what an entrypoint started before init, from `strace -f`.
type Programs struct {
	// Execs are the programs started (successful execve) after the
	// entrypoint's own execve and before init's, in order.
	Execs []string
	// Processes counts the processes created before init's execve: clone
	// without CLONE_THREAD (and clone3 likewise), fork and vfork. It can
	// exceed len(Execs): a shell's subshells, or the one child Go's os
	// package starts to learn whether the kernel has pidfds.
	Processes int
	// Init is init's execve line; "" when the log holds none.
	Init string
}

var (
	straceCall = regexp.MustCompile(`^(\d+)\s+(?:[0-9.:]+\s+)?(.*)$`)
	// An execve from a thread other than the leader goes on as the
	// leader: "12 execve(...) <pid changed to 1 ...>" then "1 <... execve
	// resumed>) = 0".
	pidChanged = regexp.MustCompile(`^(.*)<pid changed to (\d+) \.\.\.>$`)
)

// CountPrograms reads an `strace -f -e trace=execve,clone,clone3,fork,vfork`
// log (one line per event, each starting with the thread id; a timestamp
// may follow) and counts what ran before the execve of init.
func CountPrograms(log, init string) (Programs, error) {
	var p Programs
	pending := map[string]string{} // tid -> text of an unfinished call
	first := true
	for _, raw := range strings.Split(log, "\n") {
		m := straceCall.FindStringSubmatch(strings.TrimSpace(raw))
		if m == nil {
			continue
		}
		tid, text := m[1], m[2]
		switch {
		case strings.HasPrefix(text, "+++") || strings.HasPrefix(text, "---"):
			continue
		case strings.HasSuffix(text, "<unfinished ...>"):
			pending[tid] = strings.TrimSuffix(text, "<unfinished ...>")
			continue
		case pidChanged.MatchString(text):
			m := pidChanged.FindStringSubmatch(text)
			pending[m[2]] = m[1]
			continue
		case strings.HasPrefix(text, "<... "):
			// "<... execve resumed>) = 0": the call's start is pending.
			_, rest, ok := strings.Cut(text, " resumed>")
			if !ok {
				continue
			}
			text = pending[tid] + rest
			delete(pending, tid)
		}
		name, _, ok := strings.Cut(text, "(")
		if !ok {
			continue
		}
		ret, ok := result(text)
		if !ok {
			continue
		}
		switch name {
		case "execve", "execveat":
			if ret != 0 {
				continue
			}
			path := firstString(text)
			if first {
				first = false // the traced entrypoint's own
				continue
			}
			if path == init {
				p.Init = text
				return p, nil
			}
			p.Execs = append(p.Execs, path)
		case "clone", "clone3":
			if ret > 0 && !strings.Contains(text, "CLONE_THREAD") {
				p.Processes++
			}
		case "fork", "vfork":
			if ret > 0 {
				p.Processes++
			}
		}
	}
	return p, fmt.Errorf("no execve of %s in the strace log", init)
}

// result is a finished call's return value ("= 0", "= 1234", "= -1 ENOENT
// (...)"); ok is false for "= ?" (a call that never returned, such as a
// successful execve seen from a thread that died) or none. A resumed
// call's result is padded with blanks: ")        = 0".
func result(text string) (int, bool) {
	i := strings.LastIndex(text, " = ")
	if i < 0 || !strings.HasSuffix(strings.TrimRight(text[:i], " "), ")") {
		return 0, false
	}
	f := strings.Fields(text[i+len(" = "):])
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.Atoi(f[0])
	return n, err == nil
}

// firstString is the first double-quoted argument of a call.
func firstString(text string) string {
	_, rest, ok := strings.Cut(text, `("`)
	if !ok {
		return ""
	}
	s, _, _ := strings.Cut(rest, `"`)
	return s
}

// Median returns the median of ds (the mean of the middle two for an even
// count), and 0 for none: of durations, or of other samples (the
// benchmarks' RSS, in KiB).
func Median[T ~int64 | ~float64](ds []T) T {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Max returns the largest of ds, and 0 for none.
func Max(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

// Ms is d in milliseconds, to 0.1 ms.
func Ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*10) / 10
}
