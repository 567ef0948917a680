package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/proxy"
)

// maxCredentials caps the proxy credentials (user:password) a capture
// redacts. The entrypoint writes at most 6 proxy variables (HTTP_PROXY,
// HTTPS_PROXY, NO_PROXY and their lower-case forms), so the environment
// and the drop-in of an earlier boot hold at most 12 between them; 64
// leaves room for a drop-in edited by hand. Without a cap, a drop-in of
// 1 MiB ("DefaultEnvironment=a=u1@ a=u2@ ...") makes 130k of them, and
// every line archived is looked at for each.
//
// Past the cap, Archive fails, naming the file: a redactor that stopped
// recording would archive the credentials it left out in clear.
const maxCredentials = 64

// errTooManyCredentials is addCredentials' error past maxCredentials.
var errTooManyCredentials = fmt.Errorf("more than %d proxy credentials (\"user:password@\" in a value) to redact: "+
	"not archived, as the rest could not be redacted", maxCredentials)

// credentialSet is the proxy credentials to redact, each in every form
// an archived file can quote it in, with the "@" before its host. The
// zero value is an empty set.
type credentialSet struct {
	users map[string]bool // each user:password recorded, what the cap counts
	forms map[string]bool // each form, "@" included
	m     *formMatcher    // made from forms when first used; nil when stale
}

// add records user:password u in the forms the archive can hold it in: as
// it is (.host/environ), quoted for systemd (the drop-in), and each of
// those quoted again as Go and JSON strings (the plan shows the drop-in's
// content, check.json rows).
func (c *credentialSet) add(u string) error {
	if c.users[u] {
		return nil
	}
	if len(c.users) == maxCredentials {
		return errTooManyCredentials
	}
	if c.users == nil {
		c.users, c.forms = map[string]bool{}, map[string]bool{}
	}
	c.users[u] = true
	inner := func(q string) string { return q[1 : len(q)-1] }
	for _, f := range []string{u, inner(proxy.Quote(u))} {
		j, _ := json.Marshal(f)
		for _, form := range []string{f, inner(strconv.Quote(f)), inner(string(j))} {
			c.forms[form+"@"] = true
		}
	}
	c.m = nil
	return nil
}

// matcher is the formMatcher of the forms recorded, made once for all
// the text redacted after the last add.
func (c *credentialSet) matcher() *formMatcher {
	if c.m == nil {
		c.m = newFormMatcher(c.forms)
	}
	return c.m
}

// in reports whether data holds a form recorded.
func (c *credentialSet) in(data []byte) bool {
	if len(c.forms) == 0 {
		return false
	}
	m := c.matcher()
	for end := 0; ; {
		i := bytes.IndexByte(data[end:], '@')
		if i < 0 {
			return false
		}
		end += i + 1
		if startOf(m, data, end) >= 0 {
			return true
		}
	}
}

// redact replaces each form recorded in s, up to its "@", with
// "REDACTED@". Forms that overlap in s are replaced as one (ReplaceAll of
// each in turn, as this was, left a piece of one of them).
func (c *credentialSet) redact(s string) string {
	if len(c.forms) == 0 {
		return s
	}
	m := c.matcher()
	var runs [][2]int // where the forms found are, merged, in order
	for end := 0; ; {
		i := strings.IndexByte(s[end:], '@')
		if i < 0 {
			break
		}
		end += i + 1
		start := startOf(m, s, end)
		if start < 0 {
			continue
		}
		// A longer form may end here and start before the runs found.
		for len(runs) > 0 && runs[len(runs)-1][1] > start {
			start = min(start, runs[len(runs)-1][0])
			runs = runs[:len(runs)-1]
		}
		runs = append(runs, [2]int{start, end})
	}
	if len(runs) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, r := range runs {
		b.WriteString(s[last:r[0]])
		b.WriteString("REDACTED@")
		last = r[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// formMatcher finds the forms (each ending in "@") that end at an "@" of
// a text, without a pass over the text for each.
type formMatcher struct {
	groups []formGroup // by length, longest first
}

// formGroup is the forms of one length, by their last tailLen bytes: a
// text's bytes before an "@" are hashed once for each length, never more
// than tailLen of them, and compared in full only with the forms whose
// tail they are.
type formGroup struct {
	n      int
	byTail map[string][]string
}

const tailLen = 16

func newFormMatcher(forms map[string]bool) *formMatcher {
	m := &formMatcher{}
	group := map[int]int{} // a length's index in m.groups
	for f := range forms {
		i, ok := group[len(f)]
		if !ok {
			i = len(m.groups)
			group[len(f)] = i
			m.groups = append(m.groups, formGroup{n: len(f), byTail: map[string][]string{}})
		}
		tail := f[len(f)-min(len(f), tailLen):]
		m.groups[i].byTail[tail] = append(m.groups[i].byTail[tail], f)
	}
	// Longest first: a form may end with a shorter one.
	slices.SortFunc(m.groups, func(x, y formGroup) int { return y.n - x.n })
	return m
}

// startOf is where the longest form ending at s[end-1] starts; -1 when
// none does.
func startOf[T string | []byte](m *formMatcher, s T, end int) int {
	for _, g := range m.groups {
		if g.n > end {
			continue
		}
		for _, f := range g.byTail[string(s[end-min(g.n, tailLen):end])] {
			if string(s[end-g.n:end]) == f {
				return end - g.n
			}
		}
	}
	return -1
}
