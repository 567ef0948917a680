// Command summary reads `go test -json` on stdin and prints each package's
// own lines as they come ("ok  pkg  12.3s"), then, per package, how many
// tests and subtests passed, failed and were skipped, each skipped test
// with its reason, and the output of each failure. It exits 1 when a
// test or a package failed, or when a package with tests ran none of them
// (a package skipped whole, as the sandboxed packages were before they ran
// under qemu-user). make test-arm64 runs it; the JSON is kept beside.
package main
