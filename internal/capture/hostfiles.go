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

// probes writes the probe answers in system.Tree's formats.
func (b *builder) probes(p Probes) error {
	var statfs strings.Builder
	for _, k := range slices.Sorted(maps.Keys(p.FSTypes)) {
		a := p.FSTypes[k]
		switch {
		case a.Err != nil:
			b.note(system.ProbeDir+"/statfs", "%s: not recorded: %v", k, a.Err)
		case strings.ContainsAny(k, " \t\n") || strings.ContainsAny(a.Value, " \t\n"):
			b.note(system.ProbeDir+"/statfs", "%s: not recorded: %q cannot be written in its format", k, a.Value)
		default:
			fmt.Fprintf(&statfs, "%s %s\n", k, a.Value)
		}
	}
	if statfs.Len() > 0 {
		b.probeFile("statfs", []byte(statfs.String()), "filesystem types of the paths asked")
	}
	if n := p.Nofile; n != nil && n.Err == nil {
		v := strconv.FormatUint(n.Value, 10)
		if n.Value == ^uint64(0) {
			v = "unlimited"
		}
		b.probeFile("nofile", []byte(v+"\n"), "hard RLIMIT_NOFILE")
	}
	if o := p.Overlay; o != nil {
		v := "ok"
		if o.Err != nil {
			v = strings.ReplaceAll(o.Err.Error(), "\n", " ")
		}
		b.probeFile("overlay", []byte(v+"\n"), "the trial overlay mount")
	}
	var hosts strings.Builder
	for _, host := range slices.Sorted(maps.Keys(p.Lookups)) {
		var addrs []string
		// A set beside the list (which keeps the order): a host may
		// answer 130k addresses, and searching the list for each made
		// capture quadratic.
		seen := map[netip.Addr]bool{}
		hung := false
		for _, network := range []string{"ip4", "ip6", "ip"} {
			a, ok := p.Lookups[host][network]
			if !ok {
				continue
			}
			for _, ip := range a.Value {
				if !seen[ip] {
					seen[ip] = true
					addrs = append(addrs, ip.String())
				}
			}
			hung = hung || errors.Is(a.Err, context.DeadlineExceeded)
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
	for _, r := range p.Runs {
		name := path.Base(r.Argv[0])
		if first, dup := seen[name]; dup {
			b.note(system.ProbeDir+"/run/"+name, "%s not recorded: run/%s holds %s", r, name, first)
			continue
		}
		seen[name] = r.String()
		switch {
		case r.Err == nil:
			b.probeFile("run/"+name, r.Output, fmt.Sprintf("output of %s", r))
		case system.TimedOut(r.Err):
			b.probeFile("run/"+name+".hang", nil, fmt.Sprintf("%s timed out", r))
		case system.NotInstalled(r.Err):
			b.note(system.ProbeDir+"/run/"+name, "%s: not installed", r)
		default:
			msg := strings.TrimPrefix(r.Err.Error(), r.Argv[0]+": ")
			b.probeFile("run/"+name+".fail", []byte(msg+"\n"), fmt.Sprintf("%s failed", r))
		}
	}
	if err := b.environ(p.Env); err != nil {
		return err
	}
	return b.random()
}

// environ writes the variables looked up that were set, with credentials
// in URLs redacted.
func (b *builder) environ(env map[string]*string) error {
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
	return nil
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
