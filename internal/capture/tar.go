package capture

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
)

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
	// The fastest level: the archive's bulk is kernel tables (a mount
	// table of up to 16 MiB), which the default level took half a
	// second of CPU to compress, for a tenth less size.
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	// Sorted by name, every directory comes before what it holds.
	names := slices.SortedFunc(maps.Keys(b.entries), func(x, y string) int {
		return strings.Compare(b.entries[x].hdr.Name, b.entries[y].hdr.Name)
	})
	dirs := map[string]bool{}
	for _, p := range names {
		e := b.entries[p]
		// A probe file's directory (.host/, .host/run/) has no entry of
		// its own: make one. Only up to the first directory known:
		// names are sorted, so an ancestor's entry came first and made
		// the directories above it, as a directory made here had those
		// above it made in the same walk. (A walk to the root for each
		// entry was quadratic in the depth.)
		for d := path.Dir(strings.TrimSuffix(e.hdr.Name, "/")); d != "."; d = path.Dir(d) {
			if _, ok := b.entries["/"+d]; ok || dirs[d] {
				break
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: b.mtime, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		if e.render != nil {
			if err := b.writeStream(tw, p, e); err != nil {
				return err
			}
			continue
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

// writeStream archives a stream (Options.Streams): rendered and scrubbed
// once to count its size, for the header, then again into the archive.
// A second rendering of another size is an error of the tar writer's.
func (b *builder) writeStream(tw *tar.Writer, p string, e *entry) error {
	n := &countingWriter{w: io.Discard}
	if err := b.scrubbed(n, e.render); err != nil {
		return fmt.Errorf("archive %s: %w", p, err)
	}
	hdr := e.hdr
	hdr.Size = n.n
	if err := tw.WriteHeader(&hdr); err != nil {
		return fmt.Errorf("archive %s: %w", p, err)
	}
	again := &countingWriter{w: tw}
	if err := b.scrubbed(again, e.render); err != nil {
		return fmt.Errorf("archive %s: %w", p, err)
	}
	if again.n != n.n {
		return fmt.Errorf("archive %s: rendered %d bytes, then %d", p, n.n, again.n)
	}
	return nil
}

// countingWriter counts what it passes on to w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}
