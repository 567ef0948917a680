package capture

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/proxy"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// ManifestFile is the archive's table of contents, in its .host/ dir: for
// every path read, what was archived and why.
const ManifestFile = "CAPTURE"

// PlanText is a dry run as `entrypoint --dry-run` prints it, for the
// archive's .host/plan; err is why the plan is incomplete (a fatal step,
// or detection that failed), which is what a capture of a node that will
// not boot is for: the caller archives anyway.
func PlanText(d boot.Dry) ([]byte, error) {
	if d.DetectErr != nil {
		return []byte("detect: " + d.DetectErr.Error() + "\n"), d.DetectErr
	}
	var b bytes.Buffer
	if err := d.Render(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), d.Err
}

// Options are what an archive holds besides the recorded reads.
type Options struct {
	// Time stamps every entry; zero means now. A fixed time makes the
	// archive's bytes reproducible.
	Time time.Time
	// Extra are more files for .host/ (the plan as the node printed it,
	// check's report), by name. Private keys and URL credentials are
	// scrubbed from them as from the files archived.
	Extra map[string][]byte
}

// Item is one line of the manifest.
type Item struct {
	Path string // a node path, or .host/NAME
	What string
}

// Archive writes, as a gzipped tar, every path rec recorded (read from the
// system it wraps) and its probe answers as .host/ files, in the layout
// system.Tree replays. It returns the manifest it wrote to .host/CAPTURE.
//
// What goes in, for a path read:
//   - read (ReadFile): the file as read, except private keys (*.key, or
//     PEM "PRIVATE KEY" content), archived empty: that they exist is all a
//     plan uses. Proxy credentials in the systemd proxy drop-in are
//     redacted, as they are in .host/environ.
//   - only stat'ed: an empty file with the mode and owner (the mount
//     binaries: their content is never read).
//   - lstat'ed or readlink'ed symlinks: the link itself. Symlinks met
//     otherwise are followed and archived as what they lead to, so that
//     the tree never points outside itself; links under /proc (self,
//     net, ...) always are.
//   - listed (ReadDir): the directory's entries, empty.
//   - devices, sockets, FIFOs: an empty file (existence only).
//   - missing: nothing, as on the node.
func Archive(w io.Writer, rec *Recorder, o Options) ([]Item, error) {
	if o.Time.IsZero() {
		o.Time = time.Now()
	}
	b := &builder{sys: rec.sys, limit: rec.ReadLimit, preserve: map[string]bool{}, entries: map[string]*entry{}, mtime: o.Time.Truncate(time.Second)}
	// The proxy passwords are known before anything is archived: every
	// file, and the plan that quotes the drop-in, is redacted of them.
	for _, v := range rec.Probes().Env {
		if v != nil {
			b.addCredentials(*v)
		}
	}
	paths := rec.Paths()
	for p, a := range paths {
		if a&(Lstat|Link) != 0 {
			b.preserve[path.Clean(p)] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		if err := b.add(p, paths[p], b.limit(p), 0); err != nil {
			return nil, err
		}
	}
	if err := b.probes(rec.Probes()); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(o.Extra)) {
		b.probeFile(name, b.scrub(o.Extra[name]), "")
	}
	b.manifestFile()
	return b.items, b.write(w)
}

type entry struct {
	hdr  tar.Header
	data []byte
}

type builder struct {
	sys system.System
	// limit is the read limit of a path read: a file is archived as
	// much of it as the steps could read.
	limit    func(p string) int
	preserve map[string]bool
	entries  map[string]*entry // by node path
	items    []Item
	mtime    time.Time
	// keys are the private keys read: what scrub removes from the
	// extra files (a dry run shows a short file's content in full).
	keys [][]byte
	// credentials are the proxy passwords of the environment and of the
	// drop-in, each in every form an archived file can quote it in.
	credentials []string
	// resolved memoizes resolveDir of a directory reached without a
	// symlink hop: every path below it would resolve it again, each
	// level an lstat, which made capture quadratic in depth (issue 24).
	resolved map[string]string
}

// scrub removes private keys and URL credentials from an extra file (the
// rendered plan shows up to 200 bytes of a file written, quoted).
func (b *builder) scrub(data []byte) []byte {
	s := string(data)
	for _, k := range b.keys {
		if len(k) == 0 {
			continue
		}
		quoted := strconv.Quote(string(k))
		s = strings.ReplaceAll(s, quoted[1:len(quoted)-1], "(private key, not archived)")
		s = strings.ReplaceAll(s, string(k), "(private key, not archived)")
	}
	return []byte(b.redact(s))
}

// addCredentials records the user and password of a proxy setting, in
// the forms the archive can hold it in: as it is (.host/environ), quoted
// for systemd (the drop-in), and each of those quoted again as Go and
// JSON strings (the plan shows the drop-in's content, check.json rows).
func (b *builder) addCredentials(value string) {
	u := proxyUserinfo(value)
	if u == "" {
		return
	}
	inner := func(q string) string { return q[1 : len(q)-1] }
	forSystemd := inner(proxy.Quote(u))
	for _, f := range []string{u, forSystemd} {
		j, _ := json.Marshal(f)
		for _, form := range []string{f, inner(strconv.Quote(f)), inner(string(j))} {
			if !slices.Contains(b.credentials, form) {
				b.credentials = append(b.credentials, form)
			}
		}
	}
	// Longest first: a form may hold a shorter one.
	slices.SortStableFunc(b.credentials, func(x, y string) int { return len(y) - len(x) })
}

// redact replaces every recorded credential, where it stands before the
// "@" of its host, and whatever else looks like a URL's user and password.
func (b *builder) redact(s string) string {
	for _, c := range b.credentials {
		s = strings.ReplaceAll(s, c+"@", "REDACTED@")
	}
	return RedactURLCredentials(s)
}

// proxyUserinfo is the user and password of a proxy setting: "user:pass"
// of "http://user:pass@proxy:3128", and of "user:pass@proxy:3128", the
// form without a scheme that curl, Go and Docker take too; "" when there
// is none. The password may hold an unencoded '@', '/', quote or blank:
// the user part ends at the last '@' before the first '/' after an '@'.
func proxyUserinfo(v string) string {
	if i := strings.Index(v, "://"); i > 0 && urlScheme.MatchString(v[:i]) {
		v = v[i+len("://"):]
	}
	at := strings.IndexByte(v, '@')
	if at < 0 {
		return ""
	}
	end := len(v)
	if j := strings.IndexByte(v[at:], '/'); j >= 0 {
		end = at + j
	}
	return v[:strings.LastIndexByte(v[:end], '@')]
}

func (b *builder) note(p, format string, args ...any) {
	b.items = append(b.items, Item{Path: p, What: fmt.Sprintf(format, args...)})
}

// maxLinks bounds the symlinks followed for one path, as the kernel does.
const maxLinks = 40

func underProc(p string) bool { return p == "/proc" || strings.HasPrefix(p, "/proc/") }

// resolveDir adds the directories (and kept symlinks) leading to d and
// returns where d's content is in the archive.
func (b *builder) resolveDir(d string, hops int) (string, error) {
	d = path.Clean("/" + d)
	if d == "/" {
		return "/", nil
	}
	if r, ok := b.resolved[d]; ok && hops == 0 {
		return r, nil
	}
	r, err := b.resolveDirOnce(d, hops)
	if err == nil && hops == 0 {
		if b.resolved == nil {
			b.resolved = map[string]string{}
		}
		b.resolved[d] = r
	}
	return r, err
}

// resolveDirOnce is resolveDir of a clean d other than "/", not memoized.
func (b *builder) resolveDirOnce(d string, hops int) (string, error) {
	parent, err := b.resolveDir(path.Dir(d), hops)
	if err != nil {
		return "", err
	}
	cur := path.Join(parent, path.Base(d))
	fi, err := b.sys.Lstat(cur)
	if err != nil {
		return cur, nil // missing: what is under it is missing too
	}
	if fi.Mode()&fs.ModeSymlink != 0 && b.preserve[cur] && !underProc(cur) {
		target, err := b.sys.Readlink(cur)
		if err != nil {
			return "", err
		}
		b.put(cur, fi, nil, target)
		if hops++; hops > maxLinks {
			return "", &fs.PathError{Op: "capture", Path: d, Err: syscall.ELOOP}
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(cur), target)
		}
		return b.resolveDir(target, hops)
	}
	if fi, err = b.sys.Stat(cur); err == nil && fi.IsDir() {
		b.put(cur, fi, nil, "")
	}
	return cur, nil
}

// add archives node path p, read as a says (with that read's limit).
func (b *builder) add(p string, a Access, limit, hops int) error {
	p = path.Clean("/" + p)
	if p == "/" {
		return nil
	}
	dir, err := b.resolveDir(path.Dir(p), hops)
	if err != nil {
		return err
	}
	loc := path.Join(dir, path.Base(p))
	fi, err := b.sys.Lstat(loc)
	if err != nil {
		b.note(p, "absent (%s)", a)
		return nil
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if a&(Lstat|Link) != 0 && !underProc(loc) {
			target, err := b.sys.Readlink(loc)
			if err != nil {
				return err
			}
			b.put(loc, fi, nil, target)
			b.note(p, "symlink -> %s (%s)", target, a)
			if rest := a &^ (Lstat | Link); rest != 0 {
				// Also read through the link: archive where it leads.
				if hops++; hops > maxLinks {
					return &fs.PathError{Op: "capture", Path: p, Err: syscall.ELOOP}
				}
				if !path.IsAbs(target) {
					target = path.Join(path.Dir(loc), target)
				}
				return b.add(target, rest, limit, hops)
			}
			return nil
		}
		if fi, err = b.sys.Stat(loc); err != nil {
			b.note(p, "absent: a dangling symlink (%s)", a)
			return nil
		}
	}
	switch {
	case fi.IsDir():
		b.put(loc, fi, nil, "")
		if a&List == 0 {
			b.note(p, "directory (%s)", a)
			return nil
		}
		entries, err := b.sys.ReadDir(loc)
		if err != nil {
			return err
		}
		for _, e := range entries {
			child := path.Join(loc, e.Name())
			cfi, err := b.sys.Lstat(child)
			if err != nil {
				continue
			}
			if cfi.Mode()&fs.ModeSymlink != 0 {
				target, err := b.sys.Readlink(child)
				if err != nil {
					return err
				}
				b.put(child, cfi, nil, target)
			} else {
				b.put(child, cfi, []byte{}, "")
			}
		}
		b.note(p, "directory, its %d entries listed, their content not archived (%s)", len(entries), a)
	case fi.Mode().IsRegular() && a&Read != 0:
		data, err := b.sys.ReadFile(loc, limit)
		if err != nil {
			b.note(p, "unreadable: %v (%s)", err, a)
			return nil
		}
		switch {
		case IsPrivateKey(p, data):
			b.keys = append(b.keys, data)
			b.put(loc, fi, []byte{}, "")
			b.note(p, "PRIVATE KEY, NOT ARCHIVED: an empty file records only that it exists")
			return nil
		case p == proxy.DropIn:
			for _, v := range proxy.Values(data) {
				b.addCredentials(v)
			}
			if red := b.redact(string(data)); red != string(data) {
				data = []byte(red)
				b.put(loc, fi, data, "")
				b.note(p, "file, proxy credentials redacted (%s)", a)
				return nil
			}
		}
		b.put(loc, fi, data, "")
		b.note(p, "file (%s)", a)
	case fi.Mode().IsRegular():
		b.put(loc, fi, []byte{}, "")
		b.note(p, "metadata only: mode and owner, content not read (%s)", a)
	default:
		b.put(loc, fi, []byte{}, "")
		b.note(p, "%s: archived as an empty file, existence only (%s)", fi.Mode().Type(), a)
	}
	return nil
}

// put adds an entry for node path p: a directory, a symlink to target
// (target != ""), or a regular file holding data. The first entry for a
// path wins.
func (b *builder) put(p string, fi fs.FileInfo, data []byte, target string) {
	if _, ok := b.entries[p]; ok {
		return
	}
	h := tar.Header{Name: strings.TrimPrefix(p, "/"), ModTime: b.mtime, Format: tar.FormatPAX}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		h.Uid, h.Gid = int(st.Uid), int(st.Gid)
	}
	perm := int64(fi.Mode().Perm())
	if fi.Mode()&fs.ModeSetuid != 0 {
		perm |= 0o4000
	}
	if fi.Mode()&fs.ModeSetgid != 0 {
		perm |= 0o2000
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		perm |= 0o1000
	}
	switch {
	case target != "":
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
	case fi.IsDir():
		// Owner-writable, so that whoever extracts it can fill and
		// remove it; no step looks at a directory's mode.
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", perm|0o700
	default:
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, perm, int64(len(data))
	}
	b.entries[p] = &entry{hdr: h, data: data}
}

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
		// capture quadratic (issue 24).
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

func (b *builder) manifestFile() {
	var m strings.Builder
	m.WriteString("# entrypoint capture: every path the dry run (and check) read on the node, and\n")
	m.WriteString("# the answers to their probes, laid out for `entrypoint --dry-run --root DIR`.\n")
	m.WriteString("# Private keys are never archived: an empty file records only that one exists.\n")
	for _, it := range b.items {
		fmt.Fprintf(&m, "%s: %s\n", it.Path, it.What)
	}
	b.probeFile(ManifestFile, []byte(m.String()), "")
}

func (b *builder) write(w io.Writer) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	// Sorted by name, every directory comes before what it holds.
	names := slices.SortedFunc(maps.Keys(b.entries), func(x, y string) int {
		return strings.Compare(b.entries[x].hdr.Name, b.entries[y].hdr.Name)
	})
	dirs := map[string]bool{}
	for _, p := range names {
		e := b.entries[p]
		// A probe file's directory (.host/, .host/run/) has no entry of
		// its own: make one.
		for d := path.Dir(strings.TrimSuffix(e.hdr.Name, "/")); d != "."; d = path.Dir(d) {
			if _, ok := b.entries["/"+d]; ok || dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: b.mtime, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return fmt.Errorf("archive %s: %w", p, err)
		}
		if e.hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// IsPrivateKey reports whether a file is a private key: named *.key (as
// kubeadm names them under /etc/kubernetes/pki), or holding a PEM private
// key block.
func IsPrivateKey(p string, data []byte) bool {
	return strings.HasSuffix(p, ".key") || bytes.Contains(data, []byte("PRIVATE KEY-----"))
}

// urlScheme is a URL scheme (RFC 3986).
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// urlUserinfo is the userinfo of a URL: from "scheme://" to the last "@"
// before the host (a password may hold an unencoded "@" too).
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/\s"'@]*(?:@[^/\s"'@]*)*@`)

// RedactURLCredentials replaces the user and password of every URL in s:
// http://user:pass@host -> http://REDACTED@host.
func RedactURLCredentials(s string) string {
	// A match never spans a line (it holds no space): only the lines
	// with "://" and "@" go through the regexp, which made capturing a
	// host of 70k mounts spend seconds on its plan's text.
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for line := range strings.Lines(s) {
		if strings.Contains(line, "://") && strings.Contains(line, "@") {
			line = urlUserinfo.ReplaceAllString(line, "${1}REDACTED@")
		}
		b.WriteString(line)
	}
	return b.String()
}
