// Package hosttest holds what tests share: fake hosts laid out from a map
// (Tree) or copied from testdata/hosts (Host, HostsDir), mount tables
// (Mounts), a table case's outcome (Result, ErrString), and golden files
// (Golden). Its helpers take a testing.TB and fail the test themselves.
// Beside it, nstest runs tests in namespaces and a read-only sandbox, and
// outputtest knows the shapes of every line the entrypoint prints.
//
// Only tests import it.
package hosttest
