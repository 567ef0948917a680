package system

// This file holds what a Tree answers from its .host files and run/
// replays: filesystem types, limits, name lookups, commands, the
// environment and randomness.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Probe reads the probe file .host/NAME (at most limit bytes); ok is
// false when there is none. One that exists but cannot be read (a named
// pipe, a directory, a device, a symlink, one over limit) is an error
// naming it: a replay never takes it as absent, which would answer from
// the replaying machine or as if the node had said nothing.
func (t *Tree) Probe(name string, limit int) (b []byte, ok bool, err error) {
	b, err = t.readIn("/"+ProbeDir+"/"+name, limit, unix.O_NOFOLLOW)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

func (t *Tree) FSType(p string) (string, error) {
	p = path.Clean(p)
	// statfs(2) of a path that does not exist fails; so must a replay.
	if _, err := t.Stat(p); err != nil {
		return "", &fs.PathError{Op: "statfs", Path: p, Err: fs.ErrNotExist}
	}
	// Without the file, b is empty: the mount table answers.
	b, _, err := t.Probe("statfs", LimitConfig)
	if err != nil {
		return "", fmt.Errorf("statfs %s: %w", p, err)
	}
	best, bestType := "", ""
	for line := range strings.Lines(string(b)) {
		f, ok := twoFields(line)
		if ok && Under(p, f[0]) && len(f[0]) >= len(best) {
			best, bestType = f[0], f[1]
		}
	}
	if bestType != "" {
		return bestType, nil
	}
	mounts, err := t.readMounts()
	if err != nil {
		return "", fmt.Errorf("statfs %s: %w", p, err)
	}
	if m := Containing(mounts, p); m != nil {
		return FSTypeFromMountinfo(m.FSType), nil
	}
	return "", fmt.Errorf("statfs %s: %s has no mount holding it (no mount at /)", p, MountinfoPath)
}

func (t *Tree) NofileHard() (uint64, error) {
	b, ok, err := t.Probe("nofile", LimitValue)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 1 << 20, nil
	}
	s := strings.TrimSpace(string(b))
	if s == "unlimited" {
		return unix.RLIM_INFINITY, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/nofile: %w", ProbeDir, err)
	}
	return n, nil
}

func (t *Tree) OverlayTrial() error {
	b, ok, err := t.Probe("overlay", LimitValue)
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(b)); ok && s != "ok" {
		return errors.New(s)
	}
	return nil
}

func (t *Tree) LookupIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	b, _, err := t.Probe("hosts", LimitConfig)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for line := range strings.Lines(string(b)) {
		// "NAME ADDR...", or "NAME hang".
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != host {
			continue
		}
		if f[1] == "hang" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		for _, s := range f[1:] {
			a, err := netip.ParseAddr(s)
			if err == nil && ((network == "ip4" && a.Is4()) || (network == "ip6" && a.Is6()) || network == "ip") {
				out = append(out, a)
			}
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// twoFields returns the fields of a line that has exactly two, as
// strings.Fields would split it, without allocating the slice.
func twoFields(line string) (f [2]string, ok bool) {
	n := 0
	for s := range strings.FieldsSeq(line) {
		if n == 2 {
			return f, false
		}
		f[n] = s
		n++
	}
	return f, n == 2
}

// Run answers from Exec or the run/ files; a replayed command prints
// nothing on standard error.
func (t *Tree) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, []byte, error) {
	if len(argv) == 0 {
		return nil, nil, errors.New("run: empty argv")
	}
	t.mu.Lock()
	t.ran = append(t.ran, slices.Clone(argv))
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if t.Exec != nil {
		// A stand-in that answered has answered, however late on a
		// loaded test machine: only one that failed past the limit (a
		// hang, which waits for ctx) timed out.
		out, err := t.Exec(ctx, argv, stdin)
		if err != nil && ctx.Err() == context.DeadlineExceeded {
			return out, nil, &TimeoutError{What: argv[0], After: timeout}
		}
		return out, nil, err
	}
	name := "run/" + path.Base(argv[0])
	if _, ok, err := t.Probe(name+".hang", LimitValue); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", argv[0], err)
	} else if ok {
		<-ctx.Done()
		return nil, nil, &TimeoutError{What: argv[0], After: timeout}
	}
	if b, ok, err := t.Probe(name+".fail", LimitConfig); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", argv[0], err)
	} else if ok {
		return nil, nil, fmt.Errorf("%s: %s", argv[0], strings.TrimSpace(string(b)))
	}
	b, ok, err := t.Probe(name, LimitOutput)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	if !ok {
		return nil, nil, &NotInstalledError{Name: argv[0]}
	}
	return b, nil, nil
}

// Environ returns the environment recorded in Root/.host/environ (one
// KEY=VALUE a line, or NUL-separated as in /proc/PID/environ): without
// that file, an empty one, never the replaying machine's. A file there
// that cannot be read is an error naming it.
func (t *Tree) Environ() (lookup func(string) (string, bool), err error) {
	b, _, err := t.Probe("environ", LimitConfig)
	if err != nil {
		return nil, err
	}
	env := ParseEnviron(b)
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil
}

// ParseEnviron parses KEY=VALUE entries separated by NUL bytes, or by
// newlines when there is no NUL; in that form a CR before the newline
// ends the line too (a file written on another system), as for every
// table a host is read from. Only the NUL form holds a value ending in CR.
func ParseEnviron(b []byte) map[string]string {
	sep := "\n"
	if bytes.IndexByte(b, 0) >= 0 {
		sep = "\x00"
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), sep) {
		if sep == "\n" {
			kv = strings.TrimSuffix(kv, "\r")
		}
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
}

// Rand returns the randomness recorded for this tree: a deterministic
// stream seeded from Root/.host/random, so that a replayed plan (new
// machine-id, product_uuid) is the same every time; nil without that
// file. A file there that cannot be read is an error naming it.
func (t *Tree) Rand() (io.Reader, error) {
	b, ok, err := t.Probe("random", LimitValue)
	if !ok || err != nil {
		return nil, err
	}
	return SeededRand(strings.TrimSpace(string(b))), nil
}

// SeededRand is a deterministic random stream: ChaCha8 keyed with the first
// 32 bytes of seed.
func SeededRand(seed string) io.Reader {
	var key [32]byte
	copy(key[:], seed)
	return rand.NewChaCha8(key)
}
