package plan

import (
	"context"
	"fmt"
	"io/fs"

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
			log.Warn(failMsg(a, err))
		case a.OnFail == LogError:
			log.Error(a.FailMsg + ": " + err.Error())
		case a.OnFail == TolerateInUserNS && userNS:
			log.Info(failMsg(a, err))
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

func failMsg(a Action, err error) string {
	if a.FailMsg != "" {
		return a.FailMsg
	}
	return err.Error()
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
