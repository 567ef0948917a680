// Command maxrss measures the peak resident set size of an entrypoint on
// its real path, up to the execve of init.
//
// Linux keeps a process's RSS high-water mark across execve: exec_mmap
// folds the old memory map's peak into signal->maxrss, and
// getrusage(RUSAGE_SELF) reports the larger of that and the current map's
// peak. So when an entrypoint execs this small program instead of init,
// ru_maxrss is the entrypoint's peak (its children are RUSAGE_CHILDREN,
// not counted), provided it exceeds what else the process ran before: this
// program's own peak, printed beside it, and whatever exec'd the
// entrypoint. A container's first process was runc's init (a Go program
// of some 10 MiB) before it exec'd the entrypoint, so the entrypoint must
// not be that process: --spawn starts it as a child of a fresh process.
//
//	maxrss --spawn ARGV...   run ARGV as a child (stdio shared), wait,
//	                         exit with its status; prints this process's
//	                         own peak first, "spawner-hwm-kib N", and the
//	                         child's from wait4 last, "child-maxrss-kib N"
//	                         (which covers the child's children too)
//	maxrss [ARGV...]         print "maxrss-kib N own-hwm-kib M", then exec
//	                         ARGV if given
//
// It prints to stderr, so that a child's standard output stays its own.
package main
