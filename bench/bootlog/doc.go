// Package bootlog reads what the end-to-end benchmarks measure from a node
// container: the timing of its start from `docker logs -t`, and the
// programs run before init from strace's record of it. Pure functions of
// their text, so that they are unit-tested without Docker.
package bootlog
