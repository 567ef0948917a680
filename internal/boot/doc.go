// Package boot runs the entrypoint's steps, in the reference's order, on a
// host: detect, plan, then apply (or, for --dry-run, print) each step before
// detecting the next.
//
// It holds no step's logic: each step's detection and planning live in
// that step's package, and boot only orders the steps, detects once the facts
// every step needs (user namespace, cgroup version, the mount table) and
// applies or renders their plans. What a run detected is one typed record,
// State (a field per step), which a later step, the dry run, check and the
// companions read. No step package imports boot.
package boot
