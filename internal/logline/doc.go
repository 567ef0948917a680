// Package logline writes the entrypoint's log: the reference script's
// "INFO: msg" lines (kind's CLI matches "INFO: detected cgroup v1" in the
// container log, so the text form must not change), or one JSON object per
// line for machines.
//
// It does not decide what is logged; host text goes through Escape, so no
// value can start a line of its own.
package logline
