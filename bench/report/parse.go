package main

// This file holds reading go test -bench output into results.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/bench/bootlog"
)

// result is one benchmark line.
type result struct {
	pkg     string
	name    string // without the -GOMAXPROCS suffix
	n       int
	metrics map[string]float64
	order   []string // units in the order printed
	runs    int      // lines merged into this one (-count)
}

var procsSuffix = regexp.MustCompile(`-[0-9]+$`)

// parseBench reads `go test -bench` output.
func parseBench(r io.Reader) ([]result, []string, error) {
	var out []result
	var raw []string
	pkg := ""
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p
			raw = append(raw, line)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			if strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "FAIL") ||
				strings.HasPrefix(line, "goos:") || strings.HasPrefix(line, "goarch:") || strings.HasPrefix(line, "cpu:") {
				raw = append(raw, line)
			}
			continue
		}
		raw = append(raw, line)
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			continue // a "BenchmarkX" line of its own: the name before a failure
		}
		r := result{pkg: pkg, name: procsSuffix.ReplaceAllString(f[0], ""), n: n, metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%q: %w", line, err)
			}
			r.metrics[f[i+1]] = v
			r.order = append(r.order, f[i+1])
		}
		out = append(out, r)
	}
	return out, raw, s.Err()
}

// merge folds the results of a benchmark run several times (-count N)
// into one: each metric's median, n summed; first-seen order.
func merge(rs []result) []result {
	var out []result
	idx := map[string]int{}
	vals := map[string]map[string][]float64{}
	for _, r := range rs {
		key := r.pkg + " " + r.name
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, result{pkg: r.pkg, name: r.name, metrics: map[string]float64{}, order: r.order})
			vals[key] = map[string][]float64{}
		}
		out[i].n += r.n
		out[i].runs++
		for u, v := range r.metrics {
			vals[key][u] = append(vals[key][u], v)
		}
	}
	for key, i := range idx {
		for u, vs := range vals[key] {
			out[i].metrics[u] = bootlog.Median(vs)
		}
	}
	return out
}

func find(rs []result, name string) (result, bool) {
	for _, r := range rs {
		if r.name == name {
			return r, true
		}
	}
	return result{}, false
}

func readBench(path string) ([]result, []string) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	rs, raw, err := parseBench(f)
	if err != nil {
		fail(err)
	}
	return merge(rs), raw
}
