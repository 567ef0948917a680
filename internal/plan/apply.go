package plan

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Apply carries out actions in order through sys, writing log actions to
// log. A failed action is handled by its policy; the first fatal failure
// stops Apply and is returned. userNS says whether failures tolerated in a
// user namespace are tolerated here.
func Apply(ctx context.Context, sys system.System, log *logline.Logger, actions []Action, userNS bool) error {
	for _, a := range actions {
		if err := ctx.Err(); err != nil {
			return err
		}
		if a.Op == OpLog {
			log.Log(a.Level, string(a.Data))
			continue
		}
		err := do(ctx, sys, log, a)
		if err == nil {
			continue
		}
		if rb := a.Extras().Rollback; len(rb) > 0 {
			if rerr := Apply(ctx, sys, log, rb, userNS); rerr != nil {
				// What was moved aside is not back: never tolerable.
				return fmt.Errorf("%w; rolling back: %w", err, rerr)
			}
		}
		switch {
		case a.OnFail == Ignore:
		case a.OnFail == Warn:
			log.Warn(cmp.Or(a.FailMsg, err.Error()))
		case a.OnFail == LogError:
			log.Error(a.FailMsg + ": " + err.Error())
		case a.OnFail == TolerateInUserNS && userNS:
			log.Info(cmp.Or(a.FailMsg, err.Error()))
		default:
			if a.Reason != "" {
				return fmt.Errorf("%s: %w", a.Reason, err)
			}
			return err
		}
	}
	return nil
}

// created checks the files a run that exited 0 must have written.
func created(sys system.System, a Action) error {
	x := a.Extras()
	for _, p := range x.Creates {
		fi, err := sys.Stat(p)
		switch {
		case err != nil:
			return fmt.Errorf("%s exited 0 without writing %s: %w", x.Argv[0], p, err)
		case !fi.Mode().IsRegular() || fi.Size() == 0:
			return fmt.Errorf("%s exited 0 but left %s empty or not a regular file (%s)", x.Argv[0], p, fi.Mode().Type())
		}
	}
	return nil
}

func do(ctx context.Context, sys system.System, log *logline.Logger, a Action) error {
	switch a.Op {
	case OpWrite:
		return sys.WriteFile(a.Path, a.Data, a.Mode)
	case OpWriteInPlace:
		return sys.WriteFileInPlace(a.Path, a.Data)
	case OpMkdir:
		return sys.MkdirAll(a.Path, a.Mode)
	case OpRemove:
		return sys.Remove(a.Path)
	case OpSymlink:
		return sys.Symlink(a.Source, a.Path)
	case OpChown:
		return sys.Chown(a.Path, a.UID, a.GID)
	case OpChmod:
		return sys.Chmod(a.Path, a.Mode)
	case OpMount:
		return sys.Mount(a.Source, a.Path, a.FSType, a.Flags, string(a.Data))
	case OpUnmount:
		return sys.Unmount(a.Path, 0)
	case OpRun:
		x := a.Extras()
		stdout, stderr, err := sys.Run(ctx, x.Argv, x.Stdin, x.Timeout)
		forward(log, a, stdout, stderr)
		if err != nil {
			return err
		}
		return created(sys, a)
	case OpSync:
		sys.Sync()
		return nil
	}
	return &fs.PathError{Op: string(a.Op), Path: a.Path, Err: fmt.Errorf("unknown action")}
}

// Limits on what forward logs of one stream: a program gone wrong must
// not flood the node's log, nor one line fill a screen.
const (
	maxForwardedLines = 100
	maxForwardedLine  = 1000
)

// forward logs what a program a plan ran printed, a line each, as the
// script's programs wrote straight to the node's log (kubeadm's "[certs]"
// lines): standard output at INFO, unless the action drops it as the
// script sends update-alternatives' to /dev/null; standard error at WARN,
// or at the level its klog header gives a line ("E0612 ...": ERROR).
func forward(log *logline.Logger, a Action, stdout, stderr []byte) {
	if !a.Extras().DropStdout {
		forwardStream(log, stdout, func([]byte) logline.Level { return logline.Info }, "standard output")
	}
	forwardStream(log, stderr, stderrLevel, "standard error")
}

func forwardStream(log *logline.Logger, out []byte, level func([]byte) logline.Level, name string) {
	n := 0
	for line := range bytes.Lines(out) {
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if n++; n <= maxForwardedLines {
			log.Log(level(line), outputLine(line))
		}
	}
	if n > maxForwardedLines {
		log.Warn(strconv.Itoa(n-maxForwardedLines) + " more lines of " + name + " not shown")
	}
}

// stderrLevel is a standard-error line's level: a klog header's
// (Kubernetes programs: "I0612 10:00:00.000000 ..."), else WARN.
func stderrLevel(line []byte) logline.Level {
	if len(line) > 6 && line[5] == ' ' && !bytes.ContainsFunc(line[1:5], func(r rune) bool { return r < '0' || r > '9' }) {
		switch line[0] {
		case 'I':
			return logline.Info
		case 'E', 'F':
			return logline.Error
		case 'W':
			return logline.Warn
		}
	}
	return logline.Warn
}

// outputLine clips a program's line. The Logger writes it through
// logline.Escape, the one escaping rule for host text, so a terminal
// escape or a stray CR in it cannot start a line of its own.
func outputLine(b []byte) string {
	if len(b) <= maxForwardedLine {
		return string(b)
	}
	return strings.ToValidUTF8(string(b[:maxForwardedLine]), "") + "… (clipped)"
}
