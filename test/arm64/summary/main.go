package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// counts are a package's results: tests are top-level, subtests the rest.
type counts struct {
	tests, subtests map[string]int // action (pass, fail, skip) → count
	result          string         // the package's own: pass, fail, skip
	elapsed         float64
	output          []string            // the package's lines outside any test
	testOutput      map[string][]string // test → its lines
	skips, fails    []string            // tests, in order
}

func (c *counts) ran() int {
	n := 0
	for _, m := range []map[string]int{c.tests, c.subtests} {
		n += m["pass"] + m["fail"] + m["skip"]
	}
	return n
}

// summarize reads the events from r, writes the report to w and returns
// whether everything passed.
func summarize(r io.Reader, w io.Writer) (bool, error) {
	pkgs := map[string]*counts{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // the go command's own lines (a build failure's, before -json)
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			return false, fmt.Errorf("%w: %s", err, line)
		}
		if e.Package == "" {
			continue // build output that names only the import path
		}
		c := pkgs[e.Package]
		if c == nil {
			c = &counts{tests: map[string]int{}, subtests: map[string]int{}, testOutput: map[string][]string{}}
			pkgs[e.Package] = c
			order = append(order, e.Package)
		}
		switch {
		case e.Action == "output" && e.Test == "":
			c.output = append(c.output, e.Output)
			if !strings.Contains(e.Output, "[no test files]") {
				fmt.Fprint(w, e.Output) // as it comes: "ok  pkg  12.3s", or why not
			}
		case e.Action == "output":
			c.testOutput[e.Test] = append(c.testOutput[e.Test], e.Output)
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			c.result, c.elapsed = e.Action, e.Elapsed
		case e.Action == "pass" || e.Action == "fail" || e.Action == "skip":
			if strings.Contains(e.Test, "/") {
				c.subtests[e.Action]++
			} else {
				c.tests[e.Action]++
			}
			switch e.Action {
			case "skip":
				c.skips = append(c.skips, e.Test)
			case "fail":
				c.fails = append(c.fails, e.Test)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	ok := true
	var total counts
	total.tests, total.subtests = map[string]int{}, map[string]int{}
	// The packages are named below the directory they share (the module's).
	prefix := ""
	if len(order) > 0 {
		prefix = order[0][:strings.LastIndex(order[0], "/")+1]
		for _, p := range order {
			for prefix != "" && !strings.HasPrefix(p, prefix) {
				prefix = prefix[:strings.LastIndex(prefix[:len(prefix)-1], "/")+1]
			}
		}
	}
	fmt.Fprintf(w, "packages in %s/\n%-32s %8s  %-21s %s\n", strings.TrimSuffix(prefix, "/"), "package", "time", "tests pass/fail/skip", "subtests pass/fail/skip")
	for _, p := range order {
		c := pkgs[p]
		noTests := slices.ContainsFunc(c.output, func(s string) bool { return strings.Contains(s, "[no test files]") })
		if noTests {
			continue
		}
		note := ""
		switch {
		case c.result == "fail" || len(c.fails) > 0:
			ok, note = false, "FAIL"
		case c.result == "":
			ok, note = false, "FAIL: no result (the run was cut short)"
		case c.ran() == 0:
			ok, note = false, "FAIL: ran no test"
		}
		fmt.Fprintf(w, "%-32s %7.1fs  %-21s %-23s %s\n", strings.TrimPrefix(p, prefix), c.elapsed, triple(c.tests), triple(c.subtests), note)
		for a, n := range c.tests {
			total.tests[a] += n
		}
		for a, n := range c.subtests {
			total.subtests[a] += n
		}
	}
	fmt.Fprintf(w, "%-32s %8s  %-21s %s\n", "total", "", triple(total.tests), triple(total.subtests))
	for _, p := range order {
		c := pkgs[p]
		for _, t := range c.skips {
			fmt.Fprintf(w, "SKIP %s %s: %s\n", p, t, reason(c.testOutput[t]))
		}
	}
	for _, p := range order {
		c := pkgs[p]
		if c.result != "fail" && c.result != "" && len(c.fails) == 0 && (c.ran() > 0 || c.result == "skip") {
			continue
		}
		fmt.Fprintf(w, "--- %s:\n%s", p, strings.Join(c.output, ""))
		for _, t := range c.fails {
			fmt.Fprint(w, strings.Join(c.testOutput[t], ""))
		}
	}
	return ok, nil
}

func triple(m map[string]int) string {
	return fmt.Sprintf("%d/%d/%d", m["pass"], m["fail"], m["skip"])
}

// reason is the message of a skipped test: its lines but the === and ---
// ones the go command adds.
func reason(lines []string) string {
	var msg []string
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- ") {
			msg = append(msg, t)
		}
	}
	return strings.Join(msg, " ")
}

func main() {
	ok, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}
