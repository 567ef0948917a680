package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/companion"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// dispatch runs a companion command or, by default, the entrypoint.
func dispatch(argv0 string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if t, rest, ok := toolFor(args); ok { // check, capture: check.go, capture.go
		return t.run(rest, stdout, stderr)
	}
	if cmd, o, rest, ok := commandFor(argv0, args); ok {
		return runCommand(cmd, o, rest, stdin, stdout, stderr)
	}
	return run(args, stdout, stderr)
}

// commandFor finds the companion command an invocation names: the first
// argument that is not a flag (an INIT after "--" never is), or the name
// the binary is called by, so that kind's /kind/bin/NAME.sh can be a link
// to it. o holds the flags given before the name, rest the arguments after
// it; ok is false when the entrypoint itself is meant.
func commandFor(argv0 string, args []string) (cmd companion.Command, o options, rest []string, ok bool) {
	if cmd, ok := companion.Lookup(strings.TrimSuffix(filepath.Base(argv0), ".sh")); ok {
		return cmd, options{}, args, true
	}
	o, name, rest, ok := firstWord(args)
	if !ok {
		return cmd, o, nil, false
	}
	cmd, ok = companion.Lookup(name)
	return cmd, o, rest, ok
}

// firstWord parses the entrypoint's flags in args: o holds them, name is
// the first argument after them and rest the arguments after it. ok is
// false when there is none, when it follows "--" (it is INIT), or on a
// flag error, which is the entrypoint's to report (run parses the same
// flags).
func firstWord(args []string) (o options, name string, rest []string, ok bool) {
	fl := flag.NewFlagSet("entrypoint", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	o.register(fl)
	if err := fl.Parse(args); err != nil {
		return o, "", nil, false
	}
	rest = fl.Args()
	dashdash := len(rest) < len(args) && args[len(args)-len(rest)-1] == "--"
	if len(rest) == 0 || dashdash {
		return o, "", nil, false
	}
	return o, rest[0], rest[1:], true
}

// options are the flags the entrypoint and its commands share.
type options struct {
	dryRun      bool
	root        string
	logFormat   string
	showVersion bool
}

// register defines the flags on fl, with o's values as defaults (a
// command's flags default to those given before its name).
func (o *options) register(fl *flag.FlagSet) {
	if o.logFormat == "" {
		o.logFormat = string(logline.Text)
	}
	fl.BoolVar(&o.dryRun, "dry-run", o.dryRun, "detect and plan every step, print facts and plan, change nothing")
	fl.StringVar(&o.root, "root", o.root, "with --dry-run: read /proc, /sys, /etc, /kind from `DIR` (a captured or fake host)")
	fl.StringVar(&o.logFormat, "log-format", o.logFormat, "log format: text (INFO:/WARN:/ERROR: lines) or json")
	fl.BoolVar(&o.showVersion, "version", o.showVersion, "print the version and exit")
}

// parse registers the flags on fl and parses args. done says the caller
// must return code now: a usage error (2), --help (0) or --version (0).
func (o *options) parse(fl *flag.FlagSet, args []string, stdout io.Writer) (code int, done bool) {
	o.register(fl)
	if code, done := parseTool(fl, args, 2); done {
		return code, true
	}
	if o.showVersion {
		fmt.Fprintln(stdout, "entrypoint", version)
		return 0, true
	}
	return 0, false
}

// printCommands lists the companion commands for the usage text.
func printCommands(w io.Writer) {
	fmt.Fprintln(w, "\ncommands (each also takes --dry-run, --root DIR and --log-format):")
	for _, c := range companion.Commands() {
		fmt.Fprintf(w, "  %-26s %s\n", c.Name, c.Summary)
	}
	for _, t := range tools() {
		fmt.Fprintf(w, "  %-26s %s\n", t.name, t.summary)
	}
}

// hostSystem is the system the flags select: this machine, or with --root
// a captured or fake host and the environment recorded with it (never
// this machine's). ok is false, the reason printed for cmd, when root is
// not a directory (a replay of a host that is not there would plan from
// nothing) or its recorded environment cannot be read.
func hostSystem(cmd, root string, stderr io.Writer) (sys system.System, lookupEnv func(string) (string, bool), ok bool) {
	if root == "" {
		return system.Linux{}, os.LookupEnv, true
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		fmt.Fprintf(stderr, "%s: --root %s: not a directory\n", cmd, root)
		return nil, nil, false
	}
	tree := system.NewTree(root)
	env, err := tree.Environ()
	if err != nil {
		fmt.Fprintf(stderr, "%s: --root %s: %v\n", cmd, root, err)
		return nil, nil, false
	}
	return tree, env, true
}

// start is what the entrypoint and its companion commands (cmd) do once
// their flags are parsed: the log in the format asked, and the host the
// flags select, --root only with --dry-run (a replayed host is never
// changed). ok is false, the reason printed, on a usage error.
func (o *options) start(cmd string, stderr io.Writer) (log *logline.Logger, format logline.Format, sys system.System, lookupEnv func(string) (string, bool), ok bool) {
	format, err := logline.ParseFormat(o.logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "entrypoint:", err)
		return nil, format, nil, nil, false
	}
	if o.root != "" && !o.dryRun {
		fmt.Fprintln(stderr, "entrypoint: --root needs --dry-run")
		return nil, format, nil, nil, false
	}
	sys, lookupEnv, ok = hostSystem(cmd, o.root, stderr)
	return logline.New(stderr, format), format, sys, lookupEnv, ok
}

// printDryRun prints a dry run's facts and plan and returns the exit code;
// detectCode when the host's shared facts could not be detected.
func printDryRun(stdout, stderr io.Writer, log *logline.Logger, format logline.Format, d boot.Dry, detectCode int) int {
	if d.DetectErr != nil {
		log.Error(d.DetectErr.Error())
		return detectCode
	}
	if format == logline.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if encErr := enc.Encode(d.JSONReport()); encErr != nil {
			fmt.Fprintln(stderr, "entrypoint:", encErr)
			return 1
		}
	} else if rerr := d.Render(stdout); rerr != nil {
		fmt.Fprintln(stderr, "entrypoint:", rerr)
		return 1
	}
	if d.Err != nil {
		log.Error(d.Err.Error())
	}
	return boot.ExitCode(d.Err)
}

// runCommand runs a companion command; o holds the flags given before its
// name, which its own flags may override.
func runCommand(cmd companion.Command, o options, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	usage := fmt.Sprintf("usage: entrypoint %s [--dry-run [--root DIR]] [--log-format text|json]\n\n%s.\n\nflags:\n", cmd.Name, cmd.Summary)
	fl := toolFlagSet("entrypoint "+cmd.Name, usage, stderr)
	if code, done := o.parse(fl, args, stdout); done {
		return code
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "entrypoint %s: unexpected argument %q\n", cmd.Name, fl.Arg(0))
		return 2
	}
	log, lf, sys, lookupEnv, ok := o.start("entrypoint "+cmd.Name, stderr)
	if !ok {
		return 2
	}
	ctx := context.Background()
	steps := cmd.Steps(stdin)
	if o.dryRun {
		return printDryRun(stdout, stderr, log, lf, boot.DryRunOn(ctx, sys, lookupEnv, steps, boot.DryRunOptions{}), companion.ExitCode)
	}
	if cmd.Run != nil {
		if err := cmd.Run(ctx, sys, log); err != nil {
			log.Error(err.Error())
			return companion.ExitCode
		}
		return 0
	}
	h, err := boot.Detect(sys, lookupEnv)
	if err != nil {
		log.Error(err.Error())
		return companion.ExitCode
	}
	if err := boot.Run(ctx, h, steps, log); err != nil {
		log.Error(err.Error())
		return boot.ExitCode(err)
	}
	return 0
}
