// Package boot runs the entrypoint's steps, in the reference's order, on a
// host: detect, plan, then apply (or, for --dry-run, print) each step before
// detecting the next.
//
// It holds no step's logic: each step's detection and planning live in
// that step's package, and boot only orders the steps, detects once the facts
// every step needs (user namespace, cgroup version, the mount table) and
// applies or renders their plans. No step package imports boot.
package boot
