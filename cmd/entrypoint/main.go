// Command entrypoint replaces the bash entrypoint of kind's node image: it
// prepares the node container and then execs init as PID 1.
//
//	ENTRYPOINT ["/entrypoint", "/sbin/init"]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: entrypoint [flags] [--] INIT [ARG...]
       entrypoint --dry-run [--root DIR] [INIT [ARG...]]

Prepares a kind node container (the steps of kind's node entrypoint, in
order), then execs INIT with ARGs and the unchanged environment.

flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("entrypoint", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprint(stderr, usage)
		fl.PrintDefaults()
	}
	dryRun := fl.Bool("dry-run", false, "detect and plan every step, print facts and plan, change nothing")
	root := fl.String("root", "", "with --dry-run: read /proc, /sys, /etc, /kind from `DIR` (a captured or fake host)")
	logFormat := fl.String("log-format", "text", "log format: text (INFO:/WARN:/ERROR: lines) or json")
	showVersion := fl.Bool("version", false, "print the version and exit")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, "entrypoint", version)
		return 0
	}
	format, err := logline.ParseFormat(*logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "entrypoint:", err)
		return 2
	}
	log := logline.New(stderr, format)
	initArgv := fl.Args()
	if *root != "" && !*dryRun {
		fmt.Fprintln(stderr, "entrypoint: --root needs --dry-run")
		return 2
	}
	if !*dryRun && len(initArgv) == 0 {
		fl.Usage()
		return 2
	}

	var sys system.System = system.Linux{}
	lookupEnv := os.LookupEnv
	if *root != "" {
		tree := system.NewTree(*root)
		sys = tree
		if env, ok := tree.Environ(); ok {
			lookupEnv = env
		}
	}
	ctx := context.Background()
	h, err := boot.Detect(sys, lookupEnv)
	if err != nil {
		log.Error(err.Error())
		return 1
	}
	steps := boot.Steps()

	if *dryRun {
		results, err := boot.DryRun(ctx, h, steps)
		if format == logline.JSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if encErr := enc.Encode(boot.JSONReport(h, results)); encErr != nil {
				fmt.Fprintln(stderr, "entrypoint:", encErr)
				return 1
			}
		} else if rerr := boot.Render(stdout, h, results); rerr != nil {
			fmt.Fprintln(stderr, "entrypoint:", rerr)
			return 1
		}
		if err != nil {
			log.Error(err.Error())
		}
		return boot.ExitCode(err)
	}

	if err := boot.Run(ctx, h, steps, log); err != nil {
		log.Error(err.Error())
		return boot.ExitCode(err)
	}
	log.Info("starting init")
	err = system.Exec(initArgv, os.Environ())
	log.Error(err.Error())
	if errors.Is(err, os.ErrNotExist) {
		return 127
	}
	return 126
}
