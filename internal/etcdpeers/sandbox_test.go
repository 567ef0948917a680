package etcdpeers

import (
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

// TestMain runs these tests, which apply plans to fake trees and rules in
// a network namespace of their own, where they cannot change the
// machine: see nstest.Sandbox.
func TestMain(m *testing.M) { nstest.Sandbox(m, nil) }
