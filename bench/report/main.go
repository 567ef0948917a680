package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, "report:", err)
	os.Exit(1)
}

func main() {
	micro := flag.String("micro", "", "output of the Go benchmarks")
	e2e := flag.String("e2e", "", "output of the end-to-end benchmarks (-tags e2ebench)")
	details := flag.String("details", "", "raw samples of the end-to-end benchmarks (JSON)")
	commit := flag.String("commit", "", "the commit measured")
	docker := flag.String("docker", "", "the Docker engine's version")
	load := flag.String("load", "", "/proc/loadavg when the run started")
	goVersion := flag.String("go", runtime.Version(), "the Go version")
	flag.Parse()

	mrs, mraw := readBench(*micro)
	ers, eraw := readBench(*e2e)
	var det map[string]json.RawMessage
	if *details != "" {
		if b, err := os.ReadFile(*details); err == nil {
			if err := json.Unmarshal(b, &det); err != nil {
				fail(fmt.Errorf("%s: %w", *details, err))
			}
		}
	}

	w := &strings.Builder{}
	writeHeader(w, *commit, *docker, *load, *goVersion)
	writeRequirements(w, mrs, ers, det)
	writeBoot(w, ers)
	writeSteps(w, ers)
	writePrograms(w, ers, det)
	writeRSS(w, ers, det)
	writeDetectPlan(w, mrs)
	writeDefinitions(w)
	fmt.Fprintf(w, "\n## Raw benchmark output\n\n<details><summary>go test -bench (Go benchmarks, then end to end)</summary>\n\n```\n%s\n```\n</details>\n",
		strings.Join(append(append(mraw, ""), eraw...), "\n"))
	fmt.Print(w.String())
}
