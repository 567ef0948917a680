package capture

import (
	"archive/tar"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/etcdpeers"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// ManifestFile is the archive's table of contents, in its .host/ dir: for
// every path read, what was archived and why.
const ManifestFile = "CAPTURE"

// Plan is a dry run as `entrypoint --dry-run` prints it, for the
// archive's .host/plan (Options.Streams): render writes it. err is why the
// plan is incomplete (a fatal step, or detection that failed), which is
// what a capture of a node that will not boot is for: the caller archives
// anyway. The text is rendered as it is archived, never held: the plan of
// a host of deep mounts is tens of MB.
func Plan(d boot.Dry) (render func(io.Writer) error, err error) {
	if d.DetectErr != nil {
		msg := "detect: " + d.DetectErr.Error() + "\n"
		return func(w io.Writer) error {
			_, err := io.WriteString(w, msg)
			return err
		}, d.DetectErr
	}
	return d.Render, d.Err
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
	// Streams are more files for .host/, by name, too large to hold:
	// each is rendered twice, once to count its size for the tar header
	// and once into the archive, and must write the same both times. It
	// is scrubbed line by line as Extra is whole (see scrubber).
	Streams map[string]func(io.Writer) error
	// State is what the run archived detected (boot.Dry's Host.State;
	// nil when its detection failed): etcd's database is archived from
	// the membership step 10 read (State.Peers), never read again.
	State *boot.State
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
//     redacted, as they are in .host/environ; more than 64 of them, in
//     the environment and the drop-in, are an error, never archived
//     unredacted. kubeadm's kubeconfigs (/etc/kubernetes/*.conf) are
//     archived with the values of client-key-data, token and password
//     redacted. containerd's config.toml is archived with the values of
//     its registry credentials masked (containerd.Redact); one that does
//     not parse and names a credential, empty. etcd's database (which
//     holds the cluster's Secrets) is
//     archived as a file of the same format holding only its members'
//     names and peer URLs (etcdpeers.MembersDB), all that step 10 reads
//     of it, taken from what step 10 read (Options.State): the database
//     is read once, by pages, by step 10 alone.
//   - read by pages (Open): etcd's database, as above; any other file
//     whole, as far as its limit allows (none is read so today).
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
	b := &builder{sys: rec.sys, preserve: map[string]bool{}, entries: map[string]*entry{}, mtime: o.Time.Truncate(time.Second)}
	if o.State != nil {
		b.peers = o.State.Peers
	}
	// The proxy passwords are known before anything is archived: every
	// file, and the plan that quotes the drop-in, is redacted of them.
	for _, v := range rec.envSeen() {
		if v != nil {
			if err := b.addCredentials(*v); err != nil {
				return nil, fmt.Errorf("the environment: %w", err)
			}
		}
	}
	paths := rec.Paths()
	for p, a := range paths {
		if a&(Lstat|Link) != 0 {
			b.preserve[path.Clean(p)] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		// A file is archived as much of it as the steps could read.
		if err := b.add(p, paths[p], rec.ReadLimit(p), 0); err != nil {
			return nil, err
		}
	}
	if err := b.probes(rec); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(o.Extra)) {
		b.probeFile(name, b.scrub(o.Extra[name]), "")
	}
	for _, name := range slices.Sorted(maps.Keys(o.Streams)) {
		b.probeFile(name, nil, "")
		b.entries["/"+system.ProbeDir+"/"+name].render = o.Streams[name]
	}
	b.manifestFile()
	return b.items, b.write(w)
}

type entry struct {
	hdr  tar.Header
	data []byte
	// render writes a stream's content (Options.Streams), not data.
	render func(io.Writer) error
}

type builder struct {
	sys system.System
	// peers is the membership step 10 read of etcd's database.
	peers    boot.Found[etcdpeers.Facts]
	preserve map[string]bool
	entries  map[string]*entry // by node path
	items    []Item
	mtime    time.Time
	// keys are the private keys read: what scrub removes from the
	// extra files (a dry run shows a short file's content in full).
	keys [][]byte
	// credentials are the proxy passwords of the environment and of the
	// drop-in, each in every form an archived file can quote it in.
	credentials credentialSet
	// secretForms caches secrets.
	secretForms [][]byte
	// resolved memoizes resolveDir of a directory reached without a
	// symlink hop: every path below it would resolve it again, each
	// level an lstat, which made capture quadratic in depth.
	resolved map[string]string
}

func (b *builder) note(p, format string, args ...any) {
	b.items = append(b.items, Item{Path: p, What: fmt.Sprintf(format, args...)})
}
