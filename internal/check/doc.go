// Package check tells whether a host can run a kind node, and why not: one
// row per requirement, with what was observed and how to fix it.
//
// It changes nothing. It detects through the same code as the entrypoint,
// once: one dry run of every step (boot.DryRunOn), whose typed record of
// what it detected (boot.State) the rows show, plus a few read-only probes
// only check needs (cgroup mounts, /sys and / propagation, /dev/fuse,
// /lib/modules, the overlay trial where the step made none). So the rows
// and the plan row see one view of the host, and `entrypoint capture`,
// which passes a recording System, archives exactly what they read.
//
// It never changes the host, and it decides nothing a step decides: where a
// row needs a step's answer, it takes that step's typed facts.
package check
