// Package plan holds the actions a step decides on, renders them for
// --dry-run, and applies them through a system.System.
//
// Actions are plain values. A step's Plan function returns them in the order
// they must happen; log lines are actions too, so that the dry-run shows
// exactly what a real run would print, where it would print it.
//
// It knows nothing of any step, and reaches the host only through the
// System it is given.
package plan
