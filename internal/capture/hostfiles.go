package capture

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// probeFile adds .host/NAME.
func (b *builder) probeFile(name string, data []byte, what string) {
	p := "/" + system.ProbeDir + "/" + name
	b.entries[p] = &entry{hdr: tar.Header{
		Name: strings.TrimPrefix(p, "/"), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)),
		ModTime: b.mtime, Format: tar.FormatPAX,
	}, data: data}
	if what != "" {
		b.note(system.ProbeDir+"/"+name, "%s", what)
	}
}

// probes writes the answers r gave, in system.Tree's formats; one still
// being computed is left out (none is, once the dry run has returned).
func (b *builder) probes(r *Recorder) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var statfs strings.Builder
	for _, k := range slices.Sorted(maps.Keys(r.fstypes)) {
		switch a := r.fstypes[k]; {
		case !a.done.Load():
		case a.err != nil:
			b.note(system.ProbeDir+"/statfs", "%s: not recorded: %v", k, a.err)
		case strings.ContainsAny(k, " \t\n") || strings.ContainsAny(a.v, " \t\n"):
			b.note(system.ProbeDir+"/statfs", "%s: not recorded: %q cannot be written in its format", k, a.v)
		default:
			fmt.Fprintf(&statfs, "%s %s\n", k, a.v)
		}
	}
	if statfs.Len() > 0 {
		b.probeFile("statfs", []byte(statfs.String()), "filesystem types of the paths asked")
	}
	if n := &r.nofile; n.done.Load() && n.err == nil {
		v := strconv.FormatUint(n.v, 10)
		if n.v == ^uint64(0) {
			v = "unlimited"
		}
		b.probeFile("nofile", []byte(v+"\n"), "hard RLIMIT_NOFILE")
	}
	if o := &r.overlay; o.done.Load() {
		v := "ok"
		if o.err != nil {
			v = strings.ReplaceAll(o.err.Error(), "\n", " ")
		}
		b.probeFile("overlay", []byte(v+"\n"), "the trial overlay mount")
	}
	hostNames := map[string]bool{}
	for k := range r.lookups {
		_, host, _ := strings.Cut(k, "\x00")
		hostNames[host] = true
	}
	var hosts strings.Builder
	for _, host := range slices.Sorted(maps.Keys(hostNames)) {
		var addrs []string
		// A set beside the list (which keeps the order): a host may
		// answer 130k addresses, and searching the list for each made
		// capture quadratic.
		seen := map[netip.Addr]bool{}
		hung := false
		for _, network := range []string{"ip4", "ip6", "ip"} {
			a, ok := r.lookups[network+"\x00"+host]
			if !ok || !a.done.Load() {
				continue
			}
			for _, ip := range a.v {
				if !seen[ip] {
					seen[ip] = true
					addrs = append(addrs, ip.String())
				}
			}
			hung = hung || errors.Is(a.err, context.DeadlineExceeded)
		}
		switch {
		case len(addrs) > 0:
			fmt.Fprintf(&hosts, "%s %s\n", host, strings.Join(addrs, " "))
		case hung:
			fmt.Fprintf(&hosts, "%s hang\n", host)
		}
	}
	if hosts.Len() > 0 {
		b.probeFile("hosts", []byte(hosts.String()), "name lookups that answered (or hung)")
	}
	seen := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(r.runs)) {
		m := r.runs[k]
		if !m.done.Load() {
			continue
		}
		argv := strings.Split(k, "\x00")
		run := fmt.Sprintf("%q", argv)
		name := path.Base(argv[0])
		if first, dup := seen[name]; dup {
			b.note(system.ProbeDir+"/run/"+name, "%s not recorded: run/%s holds %s", run, name, first)
			continue
		}
		seen[name] = run
		switch {
		case m.err == nil:
			b.probeFile("run/"+name, m.v.stdout, fmt.Sprintf("output of %s", run))
		case system.TimedOut(m.err):
			b.probeFile("run/"+name+".hang", nil, fmt.Sprintf("%s timed out", run))
		case system.NotInstalled(m.err):
			b.note(system.ProbeDir+"/run/"+name, "%s: not installed", run)
		default:
			msg := strings.TrimPrefix(m.err.Error(), argv[0]+": ")
			b.probeFile("run/"+name+".fail", []byte(msg+"\n"), fmt.Sprintf("%s failed", run))
		}
	}
	b.environ(r.env)
	return b.random()
}

// environ writes the variables looked up that were set, with credentials
// in URLs redacted.
func (b *builder) environ(env map[string]*string) {
	var lines []string
	nul := false
	redacted := 0
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if v == nil {
			continue
		}
		red := b.redact(*v)
		if red != *v {
			redacted++
		}
		// The line form ends a line at a newline, and at a CR before
		// it: such values need the NUL form.
		nul = nul || strings.ContainsAny(red, "\r\n")
		lines = append(lines, k+"="+red)
	}
	sep := "\n"
	if nul {
		sep = "\x00"
	}
	what := fmt.Sprintf("the %d variables read that are set (of %d looked up)", len(lines), len(env))
	if redacted > 0 {
		what += fmt.Sprintf("; credentials redacted in %d", redacted)
	}
	b.probeFile("environ", []byte(strings.Join(lines, sep)+sep), what)
}

// random keeps the randomness of a replayed tree, or records a new seed, so
// that every replay of the archive draws the same identities.
func (b *builder) random() error {
	if t, ok := b.sys.(*system.Tree); ok {
		// Through the tree's rooted, bounded reader: a seed that is
		// there but cannot be read is an error naming it, never a
		// link followed out of the root, a FIFO waited on, or a new
		// seed in its place.
		seed, ok, err := t.Probe("random", system.LimitValue)
		if err != nil {
			return err
		}
		if ok {
			b.probeFile("random", seed, "the replayed host's random seed")
			return nil
		}
	}
	seed := make([]byte, 16)
	if _, err := rand.Read(seed); err != nil {
		return err
	}
	b.probeFile("random", []byte(hex.EncodeToString(seed)+"\n"),
		"a new random seed: replays draw the same new identities (never the node's own)")
	return nil
}
