package plan

import (
	"io/fs"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Op is what an action does.
type Op string

const (
	OpLog          Op = "log"
	OpWrite        Op = "write"          // atomic: temp file + rename
	OpWriteInPlace Op = "write-in-place" // truncate and rewrite (bind-mounted files)
	OpMkdir        Op = "mkdir"
	OpRemove       Op = "remove"
	OpSymlink      Op = "symlink"
	OpChown        Op = "chown"
	OpChmod        Op = "chmod"
	OpMount        Op = "mount"
	OpUnmount      Op = "umount"
	OpRun          Op = "run"
	OpSync         Op = "sync"
)

// Policy says what a failed action means.
type Policy int

const (
	// Fatal stops the step, and the entrypoint, with the step's exit code.
	Fatal Policy = iota
	// Warn logs "WARN: <OnFailMsg>" and goes on.
	Warn
	// TolerateInUserNS logs "INFO: <OnFailMsg>" and goes on inside a user
	// namespace, where some mounts are refused; elsewhere it is Fatal.
	TolerateInUserNS
	// Ignore goes on silently.
	Ignore
	// LogError logs "ERROR: <FailMsg>: <error>" and goes on: a failure the
	// node survives (after its Rollback) but its operator must see.
	LogError
)

var policyNames = [...]string{Fatal: "fatal", Warn: "warn", TolerateInUserNS: "tolerated-in-userns", Ignore: "ignore", LogError: "error"}

func (p Policy) String() string {
	if p < 0 || int(p) >= len(policyNames) {
		return "fatal"
	}
	return policyNames[p]
}

// Action is one change (or log line) of a plan. A plan of a host with
// 150k cgroup mounts holds 600k of them, so the fields only runs and
// rollbacks use are apart, in Extra (at 296 bytes an action,
// that plan alone was 178 MB).
type Action struct {
	Op     Op
	Path   string            // the file, directory or mount point changed
	Source string            // mount source; symlink target
	FSType string            // mount filesystem type
	Flags  system.MountFlags // mount flags
	Data   []byte            // file content; mount data; log message
	Mode   fs.FileMode       // file or directory mode
	// EveryBoot marks a change made on every start by design (a new
	// machine-id), so that a restart is not expected to plan it away.
	EveryBoot bool
	UID       int           // chown
	GID       int           // chown
	Level     logline.Level // log
	Reason    string        // why, one line, shown by --dry-run
	OnFail    Policy
	// FailMsg is logged when a failure is tolerated (Warn, TolerateInUserNS,
	// LogError).
	FailMsg string
	// Extra holds a run's fields and a rollback; nil when the action has
	// neither. Its fields read as the action's own (a.Argv), which
	// dereferences it: read them on a run (Op == OpRun) only, or through
	// Extras.
	*Extra
}

// Extra is what few actions have: a run's command, and a rollback.
type Extra struct {
	Argv    []string      // run: fixed argv, never a shell
	Stdin   []byte        // run
	Timeout time.Duration // run
	// DropStdout: a run's standard output is not logged (see Apply).
	DropStdout bool
	// Whole: a write's content is rendered whole, however long (a
	// runtime unit, which --dry-run must show).
	Whole bool
	// Secret: a write's content holds a secret (a private key, a
	// kubeconfig's client key, a proxy password) and is rendered by its
	// size alone, never quoted nor hashed, in text and in JSON.
	Secret bool
	// Masked, when not nil, is what is shown of a write's content: Data
	// with its secrets masked (a containerd config's registry
	// credentials), rendered as Data would be and said to be masked.
	// Data itself is never shown.
	Masked []byte
	// Creates are the files a run must leave behind, regular and not
	// empty: a command that exits 0 without them has failed all the same.
	Creates []string
	// Rollback is applied, in order, when this action fails and before its
	// policy handles the failure: it puts back what earlier actions of the
	// plan moved aside for this one (the old apiserver certificate when
	// kubeadm fails). Plans are decided before anything runs, so "undo on
	// failure" cannot be a later action.
	Rollback []Action
}

// Extras is a copy of a's Extra, the zero Extra when it has none.
func (a Action) Extras() Extra {
	if a.Extra == nil {
		return Extra{}
	}
	return *a.Extra
}

// withExtra returns a with its Extra changed by set, on a copy: actions
// are values, and two copies of one must not share a change.
func (a Action) withExtra(set func(*Extra)) Action {
	e := a.Extras()
	set(&e)
	a.Extra = &e
	return a
}

// Mutates reports whether the action changes anything (log lines don't).
func (a Action) Mutates() bool { return a.Op != OpLog }

// Changes returns the actions that change something: the plan of a host that
// needs nothing is one whose Changes are empty.
func Changes(actions []Action) []Action {
	var out []Action
	for _, a := range actions {
		if a.Mutates() {
			out = append(out, a)
		}
	}
	return out
}

// CountChanges is len(Changes(actions)), without copying them: a plan of
// a host with 150k cgroup mounts holds hundreds of thousands of actions.
func CountChanges(actions []Action) int {
	n := 0
	for _, a := range actions {
		if a.Mutates() {
			n++
		}
	}
	return n
}

// Converged reports whether actions hold no change beyond the ones made on
// every boot by design: what planning an already-fixed host must give.
func Converged(actions []Action) bool {
	for _, a := range actions {
		if a.Mutates() && !a.EveryBoot {
			return false
		}
	}
	return true
}

// OnEveryBoot marks a as a change made on every start by design.
func (a Action) OnEveryBoot() Action { a.EveryBoot = true; return a }

// Because returns a with its reason set.
func (a Action) Because(reason string) Action { a.Reason = reason; return a }

// OrWarn makes a failure of a a warning logged as msg.
func (a Action) OrWarn(msg string) Action { a.OnFail, a.FailMsg = Warn, msg; return a }

// OrError makes a failure of a an ERROR line "msg: error" that does not
// stop anything.
func (a Action) OrError(msg string) Action { a.OnFail, a.FailMsg = LogError, msg; return a }

// WithRollback sets the actions applied when a fails (see Action.Rollback).
func (a Action) WithRollback(rollback ...Action) Action {
	return a.withExtra(func(e *Extra) { e.Rollback = rollback })
}

// WithoutStdout keeps a run's standard output out of the log, where the
// script sends it to /dev/null.
func (a Action) WithoutStdout() Action {
	return a.withExtra(func(e *Extra) { e.DropStdout = true })
}

// Creating makes a run that exits 0 but leaves any of paths missing or
// empty a failure (its policy and Rollback then apply): whoever removes a
// file for a command to write it anew must not take the exit code alone as
// proof that it did.
func (a Action) Creating(paths ...string) Action {
	return a.withExtra(func(e *Extra) { e.Creates = paths })
}

// ShownWhole makes --dry-run print a write's whole content (or a run's
// whole stdin), not its size and hash past 200 bytes: for short text a
// user must be able to read before it is written (a runtime unit, an nft
// table).
func (a Action) ShownWhole() Action { return a.withExtra(func(e *Extra) { e.Whole = true }) }

// Secret marks a write whose content holds a secret: rendered by its
// size only (Extra.Secret).
func (a Action) Secret() Action { return a.withExtra(func(e *Extra) { e.Secret = true }) }

// ShownMasked makes the plan show masked, data with its secrets masked,
// in place of a write's content (Extra.Masked).
func (a Action) ShownMasked(masked []byte) Action {
	return a.withExtra(func(e *Extra) { e.Masked = masked })
}

// OrIgnore makes a failure of a silent.
func (a Action) OrIgnore() Action { a.OnFail = Ignore; return a }

// ToleratedInUserNS makes a failure inside a user namespace an INFO line msg.
func (a Action) ToleratedInUserNS(msg string) Action {
	a.OnFail, a.FailMsg = TolerateInUserNS, msg
	return a
}

// Log is a log line.
func Log(lv logline.Level, msg string) Action {
	return Action{Op: OpLog, Level: lv, Data: []byte(msg)}
}

// Info is an INFO log line.
func Info(msg string) Action { return Log(logline.Info, msg) }

// Warning is a WARN log line.
func Warning(msg string) Action { return Log(logline.Warn, msg) }

// Error is an ERROR log line that does not stop anything.
func Error(msg string) Action { return Log(logline.Error, msg) }

// WriteFile replaces path atomically with data.
func WriteFile(path string, data []byte, mode fs.FileMode) Action {
	return Action{Op: OpWrite, Path: path, Data: data, Mode: mode}
}

// WriteInPlace rewrites path in place (it is a mount point).
func WriteInPlace(path string, data []byte) Action {
	return Action{Op: OpWriteInPlace, Path: path, Data: data}
}

// Mkdir creates path and its parents.
func Mkdir(path string, mode fs.FileMode) Action {
	return Action{Op: OpMkdir, Path: path, Mode: mode}
}

// Remove removes a file or an empty directory.
func Remove(path string) Action { return Action{Op: OpRemove, Path: path} }

// Symlink creates path pointing at target.
func Symlink(target, path string) Action {
	return Action{Op: OpSymlink, Path: path, Source: target}
}

// Chown sets path's owner.
func Chown(path string, uid, gid int) Action {
	return Action{Op: OpChown, Path: path, UID: uid, GID: gid}
}

// Chmod sets path's mode (permission and setuid/setgid/sticky bits).
func Chmod(path string, mode fs.FileMode) Action {
	return Action{Op: OpChmod, Path: path, Mode: mode}
}

// Mount is mount(2).
func Mount(source, target, fstype string, flags system.MountFlags, data string) Action {
	return Action{Op: OpMount, Source: source, Path: target, FSType: fstype, Flags: flags, Data: []byte(data)}
}

// Bind bind-mounts source onto target.
func Bind(source, target string) Action {
	return Mount(source, target, "", system.Bind, "")
}

// Unmount is umount2(2) without flags.
func Unmount(target string) Action { return Action{Op: OpUnmount, Path: target} }

// Run runs argv (never through a shell), killing it after timeout.
func Run(argv []string, stdin []byte, timeout time.Duration) Action {
	return Action{Op: OpRun, Extra: &Extra{Argv: argv, Stdin: stdin, Timeout: timeout}}
}

// Sync is sync(2).
func Sync() Action { return Action{Op: OpSync} }
