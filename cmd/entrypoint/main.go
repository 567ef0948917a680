package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: entrypoint [flags] [--] INIT [ARG...]
       entrypoint --dry-run [--root DIR] [INIT [ARG...]]
       entrypoint [flags] COMMAND [--dry-run [--root DIR]]

Prepares a kind node container (the steps of kind's node entrypoint, in
order), then execs INIT with ARGs and the unchanged environment.

flags:
`

// memoryLimit is the Go runtime's soft memory limit: under the budget of
// 200 MiB of RSS that every command keeps to on any input at its cap
// (docs/performance.md). The runtime otherwise lets the heap grow to
// twice its live data before it collects: a capture of a mount table at
// its cap, some 100 MiB live, peaked anywhere from 165 to 210 MiB as the
// collections fell. A node's boot holds a few MiB and never comes near.
// GOMEMLIMIT, when set, is the runtime's as usual.
const memoryLimit = 160 << 20

func main() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(memoryLimit)
	}
	os.Exit(dispatch(os.Args[0], os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	start := time.Now()
	fl := flag.NewFlagSet("entrypoint", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprint(stderr, usage)
		fl.PrintDefaults()
		printCommands(stderr)
	}
	var o options
	settle := fl.Duration("tty-settle", logline.TTYSettle,
		"when the log is a terminal, how long the last line must have been out before init starts: systemd's console flush can drop the last lines (see docs/performance.md)")
	if code, done := o.parse(fl, args, stdout); done {
		return code
	}
	log, format, sys, lookupEnv, ok := o.start("entrypoint", stderr)
	if !ok {
		return 2
	}
	initArgv := fl.Args()
	if !o.dryRun && len(initArgv) == 0 {
		fl.Usage()
		return 2
	}
	ctx := context.Background()
	if o.dryRun {
		return printDryRun(stdout, stderr, log, format, boot.DryRunOn(ctx, sys, lookupEnv, boot.Steps(), boot.DryRunOptions{}), 1)
	}
	h, err := boot.Detect(sys, lookupEnv)
	if err != nil {
		log.Error(err.Error())
		return 1
	}
	// The runtime units run this very binary, wherever the image has it.
	if exe, err := os.Executable(); err == nil {
		h.Executable = exe
	}
	if err := boot.Run(ctx, h, boot.Steps(), log); err != nil {
		log.Error(err.Error())
		return boot.ExitCode(err)
	}
	log.Info(fmt.Sprintf("pre-init finished in %d ms", time.Since(start).Milliseconds()))
	log.Info("starting init")
	log.Settle(*settle)
	err = system.Exec(initArgv, system.Environ())
	log.Error(err.Error())
	if errors.Is(err, os.ErrNotExist) {
		return 127
	}
	return 126
}
