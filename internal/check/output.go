package check

// This file holds check's two output formats: a text table and JSON.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// WriteText prints the rows as a table, hints under the rows that need
// them, then the verdict.
func WriteText(w io.Writer, rows []Row) error {
	width := 0
	for _, r := range rows {
		width = max(width, len(r.Name))
	}
	var b bytes.Buffer
	counts := map[Status]int{}
	for _, r := range rows {
		counts[r.Status]++
		// Observed quotes the host (paths, file contents, errors):
		// one line each, whatever it holds.
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", r.Status, width, r.Name, logline.Escape(r.Observed))
		if r.Hint != "" && r.Status != Pass {
			fmt.Fprintf(&b, "%-4s  %-*s  hint: %s\n", "", width, "", logline.Escape(r.Hint))
		}
	}
	fmt.Fprintf(&b, "%d pass, %d warn, %d fail: exit %d\n", counts[Pass], counts[Warn], counts[Fail], ExitCode(rows))
	_, err := w.Write(b.Bytes())
	return err
}

// WriteJSON prints the rows as one JSON array.
func WriteJSON(w io.Writer, rows []Row) error {
	if rows == nil {
		rows = []Row{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}
