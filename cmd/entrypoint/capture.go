package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/capture"
	"github.com/kind-entrypoint/entrypoint/internal/check"
	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

const captureUsage = `usage: entrypoint capture -o FILE.tar.gz [--root DIR]

Archives every file the entrypoint's dry run and check read on this host,
and the answers to their probes (.host/), so that
    mkdir DIR && tar -xzpf FILE.tar.gz -C DIR && entrypoint --dry-run --root DIR
replays the same plan elsewhere. Private keys are never archived (an empty
file records that one exists); proxy credentials are redacted. Changes
nothing. .host/CAPTURE lists what went in, .host/plan and .host/check.json
are what the host itself said. FILE "-" is standard output (written as
it is made: a capture that fails may leave part of an archive there).

flags:
`

func runCapture(args []string, stdout, stderr io.Writer) int {
	fl := toolFlagSet("entrypoint capture", captureUsage, stderr)
	out := fl.String("o", "", "write the archive to `FILE` (.tar.gz)")
	root := fl.String("root", "", "capture the captured or fake host in `DIR` instead of this machine")
	if code, done := parseTool(fl, args, 2); done {
		return code
	}
	if fl.NArg() > 0 || *out == "" {
		fl.Usage()
		return 2
	}
	sys, lookupEnv, ok := hostSystem("entrypoint capture", *root, stderr)
	if !ok {
		return 2
	}
	return captureHost(sys, lookupEnv, *root == "", *out, stdout, stderr)
}

// captureHost is capture on sys, live when sys is this machine: its one
// dry run (check's) and the archive of what it read, written to out.
func captureHost(sys system.System, lookupEnv func(string) (string, bool), live bool, out string, stdout, stderr io.Writer) int {
	log := logline.New(stderr, logline.Text)
	rec := capture.NewRecorder(sys)
	env := rec.Env(lookupEnv)
	ctx := context.Background()
	// check's one dry run is the plan archived too.
	rep := check.Run(ctx, check.Options{Sys: rec, LookupEnv: env, Live: live})
	plan, planErr := capture.Plan(rep.Dry)
	if planErr != nil {
		log.Info("the dry run stops here: " + planErr.Error() + " (captured all the same)")
	}
	var rows bytes.Buffer
	if err := check.WriteJSON(&rows, rep.Rows); err != nil {
		log.Error(err.Error())
		return 1
	}

	var items []capture.Item
	err := writeOut(out, stdout, func(w io.Writer) (err error) {
		items, err = capture.Archive(w, rec, capture.Options{
			Extra:   map[string][]byte{"check.json": rows.Bytes()},
			Streams: map[string]func(io.Writer) error{"plan": plan},
			State:   rep.Dry.State(),
		})
		return err
	})
	if err != nil {
		log.Error("capture: " + err.Error())
		return 1
	}
	files := 0
	for _, it := range items {
		switch {
		case strings.Contains(it.What, "PRIVATE KEY"):
			log.Info(it.Path + ": a private key, not archived: an empty file records that it exists")
		case strings.Contains(it.What, "redacted"):
			log.Info(it.Path + ": " + it.What)
		}
		if !strings.HasPrefix(it.Path, ".host/") && !strings.HasPrefix(it.What, "absent") {
			files++
		}
	}
	log.Info(fmt.Sprintf("captured %d paths and the probe answers into %s (.host/%s lists them)", files, out, capture.ManifestFile))
	return 0
}

// writeOut writes the archive write makes to path atomically (a temp file
// renamed over it, removed if write fails), or to stdout for "-". It is
// written as it is made, never held: a capture of a mount table at its cap
// is megabytes of gzip even at its best. On stdout, a failed
// capture may have written part of an archive.
func writeOut(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == "-" {
		bw := bufio.NewWriterSize(stdout, 64<<10)
		if err := write(bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	bw := bufio.NewWriterSize(f, 64<<10)
	werr := write(bw)
	if werr == nil {
		werr = bw.Flush()
	}
	serr := f.Sync()
	cerr := f.Close()
	err = errors.Join(werr, serr, cerr, os.Chmod(tmp, 0o600))
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
