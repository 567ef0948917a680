package check

import (
	"strconv"
	"strings"
)

// maxListed is how many items a row's observation names before it only
// counts the rest: a host may hold tens of thousands of mounts.
const maxListed = 10

// joinClipped joins the first maxListed items with sep, and says how many
// more there are: " (and N more)".
func joinClipped(items []string, sep string) string {
	s := strings.Join(items[:min(len(items), maxListed)], sep)
	if len(items) > maxListed {
		s += " (and " + strconv.Itoa(len(items)-maxListed) + " more)"
	}
	return s
}
