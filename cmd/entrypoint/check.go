package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kind-entrypoint/entrypoint/internal/check"
	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/podnet"
)

// tool is a command for reporting on a node (check, capture), as opposed
// to the companion commands that change it, or a helper that a runtime
// unit runs (dns-forwarder): none is a step.
type tool struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
}

func tools() []tool {
	return []tool{
		{"check", "tell whether this host can run a kind node: one row per requirement (changes nothing)", runCheck},
		{"capture", "archive what the entrypoint reads here, to replay it with --dry-run --root", runCapture},
		{network.ForwarderCommand, "answer DNS on an IPv6 address for Docker's embedded DNS (run by " + network.ForwarderUnitName + ")", runDNSForwarder},
	}
}

// toolFor finds the tool named by the first argument, and returns the
// arguments after its name.
//
// The entrypoint's own flags before a tool's name are refused: taken as
// INIT, the name would make the entrypoint run every step for real
// (`entrypoint --log-format=json check`).
func toolFor(args []string) (tool, []string, bool) {
	lookup := func(name string) (tool, bool) {
		for _, t := range tools() {
			if t.name == name {
				return t, true
			}
		}
		return tool{}, false
	}
	if len(args) == 0 {
		return tool{}, nil, false
	}
	if t, ok := lookup(args[0]); ok {
		return t, args[1:], true
	}
	_, name, _, ok := firstWord(args)
	if !ok {
		return tool{}, nil, false
	}
	t, ok := lookup(name)
	if !ok {
		return tool{}, nil, false
	}
	refuse := func(_ []string, _, stderr io.Writer) int {
		fmt.Fprintf(stderr, "entrypoint: %s takes its flags after its name: entrypoint %s [flags]\n", t.name, t.name)
		return 2
	}
	t.run = refuse
	return t, nil, true
}

const checkUsage = `usage: entrypoint check [--json] [--root DIR] [--no-pod-network]

Checks every requirement of a kind node on this host (or a captured one),
and prints one row each: pass, warn or fail, what was observed, and a hint.
Changes nothing (as root, the pod-network preflight adds a veth pair and a
network namespace for a few milliseconds, and removes them).

exit status: 0 every row passes, 1 some warn, 2 one fails, 3 check could not run.

flags:
`

func runCheck(args []string, stdout, stderr io.Writer) int {
	fl := toolFlagSet("entrypoint check", checkUsage, stderr)
	jsonOut := fl.Bool("json", false, "print the rows as one JSON array of {name, status, observed, hint}")
	root := fl.String("root", "", "check the captured or fake host in `DIR` instead of this machine")
	noPodNet := fl.Bool("no-pod-network", false, "skip the pod-network preflight")
	if code, done := parseTool(fl, args, check.ExitUsage); done {
		return code
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "entrypoint check: unexpected argument %q\n", fl.Arg(0))
		return check.ExitUsage
	}
	sys, lookupEnv, ok := hostSystem("entrypoint check", *root, stderr)
	if !ok {
		return check.ExitUsage
	}
	o := check.Options{Sys: sys, LookupEnv: lookupEnv, Live: *root == "", DNSProbe: dnsforward.Probe}
	if *root == "" && !*noPodNet {
		status, _ := os.ReadFile("/proc/self/status")
		if podnet.Capable(os.Geteuid(), status) {
			o.PodNetwork = func(ctx context.Context) (string, error) {
				res, err := podnet.Preflight(ctx, podnet.Options{})
				if err != nil {
					return "", err
				}
				return res.Summary(), nil
			}
		} else if !*jsonOut {
			fmt.Fprintln(stderr, "entrypoint check: pod-network preflight skipped: it needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN")
		}
	}
	return checkHost(o, *jsonOut, stdout, stderr)
}

// checkHost is check on o's host: its rows, printed, and its exit code.
func checkHost(o check.Options, jsonOut bool, stdout, stderr io.Writer) int {
	rep := check.Run(context.Background(), o)
	write := check.WriteText
	if jsonOut {
		write = check.WriteJSON
	}
	if err := write(stdout, rep.Rows); err != nil {
		fmt.Fprintln(stderr, "entrypoint check:", err)
		return check.ExitUsage
	}
	return check.ExitCode(rep.Rows)
}

// toolFlagSet is the flag set of a tool command (check, capture): its
// usage text, then its flags.
func toolFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprint(stderr, usage)
		fl.PrintDefaults()
	}
	return fl
}

// parseTool parses a tool command's flags; done says the command ends here
// with code: 0 after -help, bad after a flag error (already reported).
func parseTool(fl *flag.FlagSet, args []string, bad int) (code int, done bool) {
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return bad, true
	}
	return 0, false
}
