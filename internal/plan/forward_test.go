package plan

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// kubeadmCerts is what `kubeadm init phase certs apiserver` prints on
// standard output when it renews the certificate.
const kubeadmCerts = `[certs] Generating "apiserver" certificate and key
[certs] apiserver serving cert is signed for DNS names [kind-control-plane kubernetes kubernetes.default] and IPs [10.96.0.1 172.18.0.4 127.0.0.1]
`

// TestApplyForwardsStdout: as in the script, whose programs wrote to the
// node's log, what a program run by a plan prints is logged, a line each.
func TestApplyForwardsStdout(t *testing.T) {
	for _, fail := range []bool{false, true} {
		tree := system.NewTree(t.TempDir())
		tree.Exec = func(context.Context, []string, []byte) ([]byte, error) {
			if fail {
				return []byte(kubeadmCerts), errors.New("exit status 1")
			}
			return []byte(kubeadmCerts), nil
		}
		var logs bytes.Buffer
		actions := []Action{Run([]string{"kubeadm"}, nil, time.Second).OrError("renewal failed"), Info("after")}
		if err := Apply(t.Context(), tree, logline.New(&logs, logline.Text), actions, false); err != nil {
			t.Fatal(err)
		}
		want := "INFO: [certs] Generating \"apiserver\" certificate and key\n" +
			"INFO: [certs] apiserver serving cert is signed for DNS names [kind-control-plane kubernetes kubernetes.default] and IPs [10.96.0.1 172.18.0.4 127.0.0.1]\n"
		if fail {
			want += "ERROR: renewal failed: exit status 1\n"
		}
		want += "INFO: after\n"
		if diff := cmp.Diff(want, logs.String()); diff != "" {
			t.Errorf("fail %t: log (-want +got):\n%s", fail, diff)
		}
	}
}

// printing is a node whose every program prints stdout and stderr.
type printing struct {
	*system.Tree
	stdout, stderr string
}

func (p printing) Run(context.Context, []string, []byte, time.Duration) ([]byte, []byte, error) {
	return []byte(p.stdout), []byte(p.stderr), nil
}

// TestApplyForwardsStderr: standard error is logged at WARN, or at the
// level of a klog header; every line stays one line without control bytes;
// a dropped standard output is not logged.
func TestApplyForwardsStderr(t *testing.T) {
	sys := printing{
		Tree:   system.NewTree(t.TempDir()),
		stdout: "update-alternatives: using /usr/sbin/iptables-nft to provide /usr/sbin/iptables (iptables) in manual mode\n",
		stderr: "W0612 10:00:00.000000     123 common.go:101] your configuration file uses a deprecated API spec\r\n" +
			"I0612 10:00:00.000001     123 version.go:256] remote version is much newer\n" +
			"E0612 10:00:00.000002     123 certs.go:42] unable to write\n" +
			"\n   \n" +
			"plain warning with a \x1b[31mcolour\x1b[0m and a\rCR\n" +
			"last line without a newline, invalid UTF-8 \xff",
	}
	var logs bytes.Buffer
	act := Run([]string{"update-alternatives"}, nil, time.Second).WithoutStdout()
	if err := Apply(t.Context(), sys, logline.New(&logs, logline.Text), []Action{act}, false); err != nil {
		t.Fatal(err)
	}
	want := "WARN: W0612 10:00:00.000000     123 common.go:101] your configuration file uses a deprecated API spec\n" +
		"INFO: I0612 10:00:00.000001     123 version.go:256] remote version is much newer\n" +
		"ERROR: E0612 10:00:00.000002     123 certs.go:42] unable to write\n" +
		`WARN: plain warning with a \x1b[31mcolour\x1b[0m and a\rCR` + "\n" +
		`WARN: last line without a newline, invalid UTF-8 \xff` + "\n"
	if diff := cmp.Diff(want, logs.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	if got := act.String(); got != "run update-alternatives >/dev/null (timeout 1s)" {
		t.Errorf("rendered %q: a dry run must show the output dropped", got)
	}
}

// TestApplyForwardLimits: a flood is cut short, and said to be; a huge line
// is clipped.
func TestApplyForwardLimits(t *testing.T) {
	sys := printing{Tree: system.NewTree(t.TempDir()),
		stdout: strings.Repeat("a line\n", maxForwardedLines+5),
		stderr: strings.Repeat("é", 2*maxForwardedLine) + "\n"}
	var logs bytes.Buffer
	if err := Apply(t.Context(), sys, logline.New(&logs, logline.Text), []Action{Run([]string{"x"}, nil, time.Second)}, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n")
	if len(lines) != maxForwardedLines+2 {
		t.Fatalf("%d lines logged, want %d forwarded, a note, and the clipped one", len(lines), maxForwardedLines+2)
	}
	if got := lines[maxForwardedLines]; got != "WARN: 5 more lines of standard output not shown" {
		t.Errorf("after the limit: %q", got)
	}
	long := lines[len(lines)-1]
	if !strings.HasSuffix(long, "… (clipped)") || len(long) > maxForwardedLine+40 || !utf8.ValidString(long) {
		t.Errorf("long line: %d bytes, %q...", len(long), long[:40])
	}
}
