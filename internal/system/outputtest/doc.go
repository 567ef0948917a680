// Package outputtest tells, for tests and fuzz targets, whether the text
// the entrypoint printed has only lines of the shapes it prints: the dry
// run's plan, the INFO:/WARN:/ERROR: log, check's rows, usage errors. A
// value from the host that started a line of its own, or carried a control
// byte, shows up as a line of no known shape.
//
// Only tests import it.
package outputtest
