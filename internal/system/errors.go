package system

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"
)

// NotExist reports whether err says a path is not there: it does not
// exist, or a component of it is a file, not a directory (ENOTDIR), which
// a captured or broken host can hold where a directory is expected.
func NotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// NotInstalledError is Run's error for a program that is not on PATH. Linux
// and Tree return the same value, so a replayed host words it exactly as
// the node did.
type NotInstalledError struct{ Name string }

func (e *NotInstalledError) Error() string {
	return fmt.Sprintf("%s: exec: %q: executable file not found in $PATH", e.Name, e.Name)
}

// Unwrap makes errors.Is(err, fs.ErrNotExist) true.
func (e *NotInstalledError) Unwrap() error { return fs.ErrNotExist }

// TimeoutError is the error of a probe that did not answer in time: a
// program Run killed at its timeout, or a name lookup given up.
type TimeoutError struct {
	What  string // the program, or "looking up NAME"
	After time.Duration
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("%s: timed out after %s", e.What, e.After) }

// NotInstalled reports whether err says a program is not installed.
func NotInstalled(err error) bool {
	var e *NotInstalledError
	return errors.As(err, &e)
}

// TimedOut reports whether err says a probe did not answer in time.
func TimedOut(err error) bool {
	var e *TimeoutError
	return errors.As(err, &e)
}
