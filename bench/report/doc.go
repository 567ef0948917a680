// Command report writes bench/results.md from the output of `go test
// -bench` (the Go benchmarks and the end-to-end ones of test/e2e, build tag
// e2ebench) and the raw samples the latter record (E2E_BENCH_DETAILS).
//
//	go run ./bench/report -micro micro.txt -e2e e2e.txt -details details.json \
//	    -commit "$(git describe --always --dirty)" -docker "$(docker version ...)" > bench/results.md
package main
