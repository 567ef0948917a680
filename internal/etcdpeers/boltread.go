package etcdpeers

// This file holds the reader of bbolt files (etcd's backend), over an
// io.ReaderAt, each page read on demand and visited at most once: a read
// costs the pages it visits, not the file's size.
//
// Why not go.etcd.io/bbolt: it opens files by path (a --root replay reads
// through system.System), takes a flock, mmaps the whole file, and
// panics on some corrupt pages; its readers trust page headers. What we
// need is two buckets of small JSON records, read once before etcd
// starts, checking every offset against the file's size and visiting no
// page twice, so that any input, however corrupt, is handled in time
// linear in the pages it names, each page's span bounded (maxSpan). The
// format is bbolt's on-disk layout (version 2), stable since 2014; the
// tests read files written by bbolt itself (testdata).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
)

// The bbolt page layout: a 16-byte header (id, flags, count, overflow),
// then elements of 16 bytes. Multi-byte fields are in the writer's byte
// order; every platform kind runs on is little-endian.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	elementSize    = 16
	metaSize       = 64 // magic..checksum
	metaSumSize    = 56 // the fields the checksum covers

	branchPage = 0x01
	leafPage   = 0x02
	metaPage   = 0x04

	bucketLeaf  = 0x01 // a leaf element whose value is a bucket
	bucketHdrSz = 16   // a bucket value: root page id, sequence

	maxDepth = 32 // a B+tree of 4 KiB pages this deep holds more than any file
	// maxSpan bounds one page with its overflow pages, what one visit
	// reads and holds: the membership's pages are a few KiB (a record is
	// at most maxRecord), and an overflow count read from a torn page
	// of a large sparse file must not size a buffer of gigabytes.
	maxSpan = 4 << 20
)

// ErrCorrupt is what every malformed file gives, wrapped with where.
var ErrCorrupt = errors.New("not a valid bbolt file")

var le = binary.LittleEndian

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// boltFile is one read of a bbolt file.
type boltFile struct {
	r        io.ReaderAt
	size     uint64
	pageSize uint64
	maxPage  uint64          // the meta's high-water mark: pages beyond are free space
	seen     map[uint64]bool // pages visited: none twice (a loop, or a page shared by two trees)
}

// readAt is n bytes of r at off, which the caller has checked lie within
// size: a short read is a file that shrank while read (etcd running).
func readAt(r io.ReaderAt, off, n uint64) ([]byte, error) {
	buf := make([]byte, n)
	m, err := r.ReadAt(buf, int64(off))
	switch {
	case m == len(buf):
		return buf, nil
	case err == nil || err == io.EOF:
		return nil, fmt.Errorf("the file ends at offset %d, before the %d bytes read there (it shrank while read)", off+uint64(m), n)
	}
	return nil, fmt.Errorf("offset %d: %w", off, err)
}

type boltMeta struct {
	pageSize, root, highWater, txid uint64
}

// parseMeta reads the meta page at off; ok false when it is not a valid
// one (a torn write leaves one of the two invalid), its fields then
// unused.
func parseMeta(r io.ReaderAt, size, off uint64) (boltMeta, bool, error) {
	if off+pageHeaderSize+metaSize > size {
		return boltMeta{}, false, nil
	}
	p, err := readAt(r, off, pageHeaderSize+metaSize)
	if err != nil {
		return boltMeta{}, false, err
	}
	m := p[pageHeaderSize : pageHeaderSize+metaSize]
	h := fnv.New64a()
	h.Write(m[:metaSumSize])
	ps := uint64(le.Uint32(m[8:]))
	ok := le.Uint16(p[8:])&metaPage != 0 && le.Uint32(m[0:]) == boltMagic && le.Uint32(m[4:]) == boltVersion &&
		h.Sum64() == le.Uint64(m[metaSumSize:]) && ps >= 512 && ps <= 1<<20 && ps&(ps-1) == 0
	return boltMeta{pageSize: ps, root: le.Uint64(m[16:]), highWater: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, ok, nil
}

// openBolt picks the newest valid meta page of the file r of size bytes,
// as bbolt does: page 0, or page 1 (found at the page size page 0 names,
// or, when page 0 is torn, at each page size bbolt may have used).
func openBolt(r io.ReaderAt, size int64) (*boltFile, uint64, error) {
	if size <= 0 {
		return nil, 0, corrupt("empty file")
	}
	m0, ok0, err := parseMeta(r, uint64(size), 0)
	if err != nil {
		return nil, 0, err
	}
	sizes := []uint64{m0.pageSize}
	if !ok0 {
		sizes = []uint64{4096, 8192, 16384, 32768, 65536, 512, 1024, 2048}
	}
	best, found := m0, ok0
	for _, ps := range sizes {
		m1, ok, err := parseMeta(r, uint64(size), ps)
		if err != nil {
			return nil, 0, err
		}
		if ok && m1.pageSize == ps && (!found || m1.txid > best.txid) {
			best, found = m1, true
		}
	}
	if !found {
		return nil, 0, corrupt("no valid meta page")
	}
	return &boltFile{r: r, size: uint64(size), pageSize: best.pageSize, maxPage: best.highWater, seen: map[uint64]bool{}}, best.root, nil
}

// ref is where a page id was read: the element (of page page, at file
// offset off) that names a child or a bucket's root, or the meta page.
// Only what the walk itself computed is in an error about a reference,
// never the id read: the element may be stale data of another page (a
// torn write), which can be any bytes of the file, a Secret's included.
type ref struct {
	page, off uint64
	what      string // "meta", "branch element", "bucket"
}

func (r ref) String() string {
	if r.what == "meta" {
		return "the meta page's root"
	}
	return fmt.Sprintf("the %s at offset %d (page %d)", r.what, r.off, r.page)
}

// page is the bytes of page id with its overflow pages, checked.
func (b *boltFile) page(id uint64, from ref) ([]byte, error) {
	if id < 2 || id >= b.maxPage {
		return nil, corrupt("%s names a page outside 2..%d", from, b.maxPage)
	}
	if b.seen[id] {
		return nil, corrupt("page %d reached twice, again from %s", id, from)
	}
	b.seen[id] = true
	off := id * b.pageSize
	if off/b.pageSize != id || off+pageHeaderSize > b.size {
		return nil, corrupt("page %d (offset %d) beyond the file's %d bytes", id, off, b.size)
	}
	hdr, err := readAt(b.r, off, pageHeaderSize)
	if err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if le.Uint64(hdr) != id {
		return nil, corrupt("page %d (offset %d): its header names another page (a torn or stale page)", id, off)
	}
	span := (uint64(le.Uint32(hdr[12:])) + 1) * b.pageSize
	switch {
	case span > b.size-off:
		return nil, corrupt("page %d (offset %d): its overflow count runs past the file's end", id, off)
	case span > maxSpan:
		return nil, corrupt("page %d (offset %d): %d bytes with its overflow pages, more than the %d a membership page may span", id, off, span, maxSpan)
	}
	p, err := readAt(b.r, off, span)
	if err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if le.Uint64(p) != id {
		return nil, corrupt("page %d (offset %d): its header changed while read (the file is being written)", id, off)
	}
	return p, nil
}

// kv is one leaf element, and where it is: the page that holds it (for
// an inline bucket's element, the page that holds the bucket) and the
// file offset of its value.
type kv struct {
	key, value []byte
	flags      uint32
	page, off  uint64
}

// each calls fn for every leaf element of the tree rooted at page id.
func (b *boltFile) each(id uint64, from ref, depth int, fn func(kv) error) error {
	if depth > maxDepth {
		return corrupt("%s: a tree deeper than %d", from, maxDepth)
	}
	p, err := b.page(id, from)
	if err != nil {
		return err
	}
	base := id * b.pageSize
	switch flags := le.Uint16(p[8:]); {
	case flags&branchPage != 0:
		n := uint64(le.Uint16(p[10:]))
		if pageHeaderSize+n*elementSize > uint64(len(p)) {
			return corrupt("page %d (offset %d): its element count overflows it", id, base)
		}
		for i := range n {
			at := pageHeaderSize + i*elementSize
			child := ref{page: id, off: base + at, what: "branch element"}
			if err := b.each(le.Uint64(p[at+8:]), child, depth+1, fn); err != nil {
				return err
			}
		}
		return nil
	case flags&leafPage != 0:
		return leafElements(p, id, base, fn)
	default:
		return corrupt("page %d (offset %d): neither a branch nor a leaf page", id, base)
	}
}

// leafElements calls fn for each element of the leaf page p (a page of
// the file, or a bucket's inline page) at file offset base.
func leafElements(p []byte, id, base uint64, fn func(kv) error) error {
	if len(p) < pageHeaderSize || le.Uint16(p[8:])&leafPage == 0 {
		return corrupt("page %d: not a leaf page at offset %d", id, base)
	}
	n := uint64(le.Uint16(p[10:]))
	size := uint64(len(p))
	if pageHeaderSize+n*elementSize > size {
		return corrupt("page %d (offset %d): the leaf's element count overflows it", id, base)
	}
	for i := range n {
		at := pageHeaderSize + i*elementSize
		e := p[at:]
		k := at + uint64(le.Uint32(e[4:]))
		v := k + uint64(le.Uint32(e[8:]))
		end := v + uint64(le.Uint32(e[12:]))
		if end > size {
			return corrupt("page %d: the leaf element at offset %d runs past its page", id, base+at)
		}
		if err := fn(kv{key: p[k:v], value: p[v:end], flags: le.Uint32(e[0:]), page: id, off: base + v}); err != nil {
			return err
		}
	}
	return nil
}

// bucket calls fn for each element of the bucket e: a tree of its own,
// or inline, its leaf page after the bucket header.
func (b *boltFile) bucket(e kv, fn func(kv) error) error {
	if len(e.value) < bucketHdrSz {
		return corrupt("page %d: the bucket at offset %d is too short for a bucket header", e.page, e.off)
	}
	if root := le.Uint64(e.value); root != 0 {
		return b.each(root, ref{page: e.page, off: e.off, what: "bucket"}, 0, fn)
	}
	return leafElements(e.value[bucketHdrSz:], e.page, e.off+bucketHdrSz, fn)
}

// readBuckets calls fn with each element of the named top-level buckets,
// in the order named (a missing bucket has none), until fn's first
// error. Nothing is gathered on the way: what fn keeps is all the read
// holds. Nested buckets are not read.
func readBuckets(r io.ReaderAt, size int64, names []string, fn func(bucket string, e kv) error) error {
	b, root, err := openBolt(r, size)
	if err != nil {
		return err
	}
	found := make([]*kv, len(names))
	err = b.each(root, ref{what: "meta"}, 0, func(e kv) error {
		if i := slices.Index(names, string(e.key)); i >= 0 && e.flags&bucketLeaf != 0 {
			found[i] = &e
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, n := range names {
		if found[i] == nil {
			continue
		}
		var stopped error // fn's own error: passed on as it is
		err := b.bucket(*found[i], func(e kv) error {
			if e.flags&bucketLeaf != 0 {
				return nil
			}
			stopped = fn(n, e)
			return stopped
		})
		switch {
		case stopped != nil:
			return stopped
		case err != nil:
			return fmt.Errorf("bucket %s: %w", n, err)
		}
	}
	return nil
}
