// Package nstest runs privileged tests in namespaces of their own, and checks
// that a test binary leaves the machine's mount table as it found it; Network
// shows a network namespace, for a test to compare before and after.
//
// A test calls Unshare at its start: its goroutine is locked to its OS thread
// for good, and that thread alone moves into the new namespaces. When the
// test function returns, the goroutine exits still locked, so the Go runtime
// ends the thread and with it the namespaces; the rest of the process never
// leaves the machine's namespaces. Inside, read the mount table from
// /proc/thread-self/mountinfo (ThreadMountinfo): /proc/self names the main
// thread, which stays in the original namespace.
//
// A package with such tests wires its TestMain to Main. This package imports
// system only for its mount flags, and not mounts: their own tests, which
// import it, are external test packages (system_test, mounts_test).
//
// Only tests import it.
package nstest
