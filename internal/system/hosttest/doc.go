// Package hosttest holds what tests share to lay out fake hosts and compare
// output with golden files; only tests import it.
//
// Only tests import it.
package hosttest
