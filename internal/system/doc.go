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
// It also holds the path facilities every step shares: a Resolver (symlinks
// resolved through a System, as the kernel does for a mount target) and
// Under (whether a path is a directory or lies below it).
//
// Libraries weighed for these and not taken (measured at bac7143):
//
//   - Resolve is not filepath-securejoin's SecureJoinVFS (v0.7.0) over
//     Lstat and Readlink: it joins the resolved prefix again at every name,
//     so a path as deep as PATH_MAX allows took 34 ms and 18 MB instead of
//     0.57 ms and 0.39 MB, and a link padded with 100,000 "./" 400,000
//     allocations instead of 6 (BenchmarkResolve; TestResolveLinear fails).
//     It also allows 255 links where the kernel stops at 40, and walks on
//     past a missing name.
//   - A Tree's reads (rooted.go) are not its OpenatInRoot and Reopen: each
//     open adds a readlink and a reopen through /proc, so detecting and
//     planning a fake host took about 5 times as long with 3 times the
//     allocations (BenchmarkDetectPlan/aufs: 951 allocations, 1.9-2.8 ms,
//     became 3,065 and 11.5-13.2 ms), and the binary grew by 100 KiB. Its
//     fallback for kernels without openat2 cannot be forced, so what
//     TestWalkAsOpenat2 checks of walk would go untested.
//   - Linux.WriteFile is not moby/sys/atomicwriter's WriteFile (v0.1.0): it
//     refuses to replace a symlink, which WriteFile (and a Tree's) does,
//     and chmods by name after closing, not the open file. A Tree writes
//     through os.Root, which it cannot, so it would replace 25 lines.
package system
