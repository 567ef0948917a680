package check

import (
	"strconv"
	"strings"
)

// maxListed is how many items a row's observation names before it only
// counts the rest: a host may hold tens of thousands of mounts.
const maxListed = 10

// joinClipped joins the first max items with ", " and counts the rest.
func joinClipped(items []string, max int) string {
	return strings.Join(items[:min(len(items), max)], ", ") + clippedCount(len(items), max)
}

// clippedCount is " (and N more)" for the items of n past max, or "".
func clippedCount(n, max int) string {
	if n <= max {
		return ""
	}
	return " (and " + strconv.Itoa(n-max) + " more)"
}
