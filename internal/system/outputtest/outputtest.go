package outputtest

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// shapes are the forms every output line takes.
var shapes = regexp.MustCompile(`^(facts:|  user namespace: (true|false)|  cgroup: v[12]|step \d{1,2} [a-z_0-9-]+:|  fact [^:]+: .*|  (log|write|write-in-place|mkdir|remove|symlink|chown|chmod|mount|umount|run|sync)( .*)?|  FATAL: .*|  \(nothing to do\)|(INFO|WARN|ERROR): .*|(pass|warn|fail)  \S+ +.*|  +hint: .*|\d+ pass, \d+ warn, \d+ fail: exit \d|entrypoint( [a-z-]+)?: .*)$`)

// forged are the texts the hostile tests plant in host files: none may
// start a line.
var forged = regexp.MustCompile(`(?m)^\s*(step 11 (pwned|forged)|run rm -rf|mount / on /etc|ERROR: forged|pass  pod-network  forged)`)

// MaxLine is the longest line expected.
const MaxLine = 64 << 10

// Problems lists what is wrong with the lines of out, at most 10 of them.
func Problems(out string) []string {
	var p []string
	if m := forged.FindString(out); m != "" {
		p = append(p, fmt.Sprintf("forged line %q", m))
	}
	if out == "" {
		return p
	}
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if len(p) >= 10 {
			break
		}
		if j := strings.IndexFunc(line, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }); j >= 0 {
			p = append(p, fmt.Sprintf("line %d has a control byte or invalid UTF-8 at %d: %.300q", i+1, j, line))
		}
		if !shapes.MatchString(line) {
			p = append(p, fmt.Sprintf("line %d of no known shape: %.300q", i+1, line))
		}
		if len(line) > MaxLine {
			p = append(p, fmt.Sprintf("line %d is %d bytes long", i+1, len(line)))
		}
	}
	return p
}
