package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: junitdiff NAME=REPORT.xml [NAME=REPORT.xml...]")
		os.Exit(2)
	}
	var runs []run
	for _, arg := range os.Args[1:] {
		name, path, ok := strings.Cut(arg, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "junitdiff: %q is not NAME=REPORT.xml\n", arg)
			os.Exit(2)
		}
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "junitdiff:", err)
			os.Exit(2)
		}
		r, err := parseReport(name, f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "junitdiff: %s: %v\n", path, err)
			os.Exit(2)
		}
		runs = append(runs, r)
	}
	ok := writeComparison(os.Stdout, runs)
	if !ok {
		os.Exit(1)
	}
}

// Results of one spec, as a run reports it.
const (
	passed      = "passed"
	failed      = "failed"
	skipped     = "skipped"      // skipped at run time (the spec said why)
	notSelected = "not selected" // left out by focus, skip or label filter
)

// A run is one JUnit report: each spec's result and failure line by name.
type run struct {
	name    string
	results map[string]string
	reasons map[string]string // first line of a failure or run-time skip
}

type junitCase struct {
	Name    string `xml:"name,attr"`
	Status  string `xml:"status,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"error"`
}

// maxReport caps what is read of one report: a full e2e report with every
// spec of the suite listed is about 10 MiB.
const maxReport = 256 << 20

// parseReport reads a JUnit report. Specs are the test cases whose names
// ginkgo prefixes with [It]; the suite's own nodes
// ([SynchronizedBeforeSuite], [ReportAfterSuite]...) count only when they
// fail, as a failure of the run.
func parseReport(name string, r io.Reader) (run, error) {
	dec := xml.NewDecoder(io.LimitReader(r, maxReport))
	out := run{name: name, results: map[string]string{}, reasons: map[string]string{}}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return run{}, err
		}
		start, ok := tok.(xml.StartElement)
		if !ok || start.Name.Local != "testcase" {
			continue
		}
		var c junitCase
		if err := dec.DecodeElement(&c, &start); err != nil {
			return run{}, err
		}
		result, reason := caseResult(c)
		if !strings.HasPrefix(c.Name, "[It] ") && result != failed {
			continue
		}
		out.results[c.Name] = result
		if reason != "" {
			out.reasons[c.Name] = reason
		}
	}
	if len(out.results) == 0 {
		return run{}, fmt.Errorf("no test cases")
	}
	return out, nil
}

// caseResult is a test case's result and the first line of why.
func caseResult(c junitCase) (result, reason string) {
	switch {
	case c.Failure != nil:
		return failed, firstLine(c.Failure.Message + "\n" + c.Failure.Text)
	case c.Error != nil:
		return failed, firstLine(c.Error.Message + "\n" + c.Error.Text)
	case c.Skipped != nil:
		// ginkgo writes "skipped" for a spec the filters left out, and
		// "skipped - REASON" for one that skipped itself when it ran.
		if msg, ok := strings.CutPrefix(c.Skipped.Message, "skipped - "); ok {
			return skipped, firstLine(msg)
		}
		return notSelected, ""
	case c.Status == "" || c.Status == passed:
		return passed, ""
	}
	return failed, "status " + c.Status
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 300 {
				l = l[:300] + "..."
			}
			return l
		}
	}
	return ""
}

// summary counts one run's results.
type summary struct {
	selected, conformance, passed, failed, skipped int
}

func summarize(r run) summary {
	var s summary
	for name, res := range r.results {
		if res == notSelected {
			continue
		}
		s.selected++
		if strings.Contains(name, "[Conformance]") {
			s.conformance++
		}
		switch res {
		case passed:
			s.passed++
		case failed:
			s.failed++
		case skipped:
			s.skipped++
		}
	}
	return s
}

// writeComparison writes the Markdown comparison and reports whether the
// first run is clean: no failure, and nothing that passed elsewhere and not
// in it.
func writeComparison(w io.Writer, runs []run) bool {
	ok := true
	fmt.Fprintf(w, "| | %s |\n|---|%s\n", joinNames(runs, " | "), strings.Repeat("---|", len(runs)))
	sums := make([]summary, len(runs))
	for i, r := range runs {
		sums[i] = summarize(r)
	}
	row := func(label string, get func(summary) int) {
		cells := make([]string, len(sums))
		for i, s := range sums {
			cells[i] = fmt.Sprint(get(s))
		}
		fmt.Fprintf(w, "| %s | %s |\n", label, strings.Join(cells, " | "))
	}
	row("specs selected", func(s summary) int { return s.selected })
	row("of them [Conformance]", func(s summary) int { return s.conformance })
	row("passed", func(s summary) int { return s.passed })
	row("failed", func(s summary) int { return s.failed })
	row("skipped at run time", func(s summary) int { return s.skipped })
	if sums[0].failed > 0 {
		ok = false
	}

	if len(runs) > 1 {
		fmt.Fprintf(w, "\n## Results that differ\n\n")
		n := 0
		for _, name := range allNames(runs) {
			results := make([]string, len(runs))
			same := true
			for i, r := range runs {
				results[i] = r.results[name]
				if results[i] == "" {
					results[i] = "absent"
				}
				same = same && results[i] == results[0]
			}
			if same {
				continue
			}
			n++
			cells := make([]string, len(runs))
			for i, r := range runs {
				cells[i] = r.name + ": " + results[i]
				if results[i] == passed && runs[0].results[name] != passed && runs[0].results[name] != notSelected {
					ok = false
				}
			}
			fmt.Fprintf(w, "- %s (%s)\n", name, strings.Join(cells, ", "))
		}
		if n == 0 {
			fmt.Fprintln(w, "none")
		}
	}

	for _, r := range runs {
		var lines []string
		for name, res := range r.results {
			if res == failed || res == skipped {
				lines = append(lines, fmt.Sprintf("- %s %s: %s", res, name, r.reasons[name]))
			}
		}
		sort.Strings(lines)
		fmt.Fprintf(w, "\n## %s: failed and skipped at run time\n\n", r.name)
		if len(lines) == 0 {
			fmt.Fprintln(w, "none")
		}
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
	}
	return ok
}

func joinNames(runs []run, sep string) string {
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.name
	}
	return strings.Join(names, sep)
}

// allNames is every spec name of every run, sorted.
func allNames(runs []run) []string {
	seen := map[string]bool{}
	var names []string
	for _, r := range runs {
		for name := range r.results {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	return names
}
