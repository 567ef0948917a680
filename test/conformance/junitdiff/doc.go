// Command junitdiff compares the JUnit reports of conformance runs (ginkgo's
// --junit-report) and prints the comparison as Markdown:
//
//	junitdiff NAME=REPORT.xml [NAME=REPORT.xml]
//
// For each run: the specs selected (those the focus, skip and label filter
// let through), of them the [Conformance] ones, and how many passed, failed
// or were skipped at run time; then every spec whose result differs between
// the runs, and the first line of every failure.
//
// It exits 1 when the first run failed a spec, or when a spec passed in
// another run and not in the first: the first run is ours, the others are
// controls.
package main
