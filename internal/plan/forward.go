package plan

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// Limits on what forward logs of one stream: a program gone wrong must
// not flood the node's log, nor one line fill a screen.
const (
	maxForwardedLines = 100
	maxForwardedLine  = 1000
)

// forward logs what a program a plan ran printed, a line each, as the
// script's programs wrote straight to the node's log (kubeadm's "[certs]"
// lines): standard output at INFO, unless the action drops it as the
// script sends update-alternatives' to /dev/null; standard error at WARN,
// or at the level its klog header gives a line ("E0612 ...": ERROR).
func forward(log *logline.Logger, a Action, stdout, stderr []byte) {
	if !a.Extras().DropStdout {
		forwardStream(log, stdout, func([]byte) logline.Level { return logline.Info }, "standard output")
	}
	forwardStream(log, stderr, stderrLevel, "standard error")
}

func forwardStream(log *logline.Logger, out []byte, level func([]byte) logline.Level, name string) {
	n := 0
	for line := range bytes.Lines(out) {
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if n++; n <= maxForwardedLines {
			log.Log(level(line), outputLine(line))
		}
	}
	if n > maxForwardedLines {
		log.Warn(strconv.Itoa(n-maxForwardedLines) + " more lines of " + name + " not shown")
	}
}

// stderrLevel is a standard-error line's level: a klog header's
// (Kubernetes programs: "I0612 10:00:00.000000 ..."), else WARN.
func stderrLevel(line []byte) logline.Level {
	if len(line) > 6 && line[5] == ' ' && isDigits(line[1:5]) {
		switch line[0] {
		case 'I':
			return logline.Info
		case 'E', 'F':
			return logline.Error
		case 'W':
			return logline.Warn
		}
	}
	return logline.Warn
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// outputLine clips a program's line. The Logger writes it through
// logline.Escape, the one escaping rule for host text, so a terminal
// escape or a stray CR in it cannot start a line of its own.
func outputLine(b []byte) string {
	if len(b) <= maxForwardedLine {
		return string(b)
	}
	return strings.ToValidUTF8(string(b[:maxForwardedLine]), "") + "… (clipped)"
}
