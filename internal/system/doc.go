// Package system is the one seam between the entrypoint and the kernel.
//
// Every step reads files and asks the kernel questions through a System, and
// every change it makes goes through one too. Paths are always the absolute
// paths the node sees ("/proc/self/uid_map"); an implementation maps them onto
// its own root. Linux is the real host; Tree is a directory that stands in for
// one, used to replay a captured host (--dry-run --root) and in tests.
//
// Nothing else in the binary calls the kernel for the steps. A Tree reads
// and writes only inside its root: a link that leads out is an error.
//
// It also holds the path facilities every step shares: Resolve (symlinks
// resolved through a System, as the kernel does for a mount target) and
// Under (whether a path is a directory or lies below it).
package system
