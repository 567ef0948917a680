package etcdpeers

// This file holds the reader of bbolt files (etcd's backend): pure, over
// the file's bytes, each page visited at most once.
//
// Why not go.etcd.io/bbolt: it opens files by path (a --root replay reads
// through system.System), takes a flock, mmaps the whole file, and
// panics on some corrupt pages; its readers trust page headers. What we
// need is two buckets of small JSON records, read once before etcd
// starts: about 150 lines that check every offset against the bytes read
// and never revisit a page, so that any input, however corrupt, is
// handled in time linear in its size. The format is bbolt's on-disk
// layout (version 2), stable since 2014; the tests read files written
// by bbolt itself (testdata/etcd).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
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
)

// ErrCorrupt is what every malformed file gives, wrapped with where.
var ErrCorrupt = errors.New("not a valid bbolt file")

var le = binary.LittleEndian

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// boltFile is a bbolt file's bytes and the state of one read of it.
type boltFile struct {
	data     []byte
	pageSize uint64
	maxPage  uint64          // the meta's high-water mark: pages beyond are free space
	seen     map[uint64]bool // pages visited: none twice (a loop, or a page shared by two trees)
}

type boltMeta struct {
	pageSize, root, highWater, txid uint64
}

// parseMeta reads the meta page at off; ok false when it is not a valid
// one (a torn write leaves one of the two invalid).
func parseMeta(data []byte, off uint64) (boltMeta, bool) {
	if off+pageHeaderSize+metaSize > uint64(len(data)) {
		return boltMeta{}, false
	}
	p := data[off:]
	if le.Uint16(p[8:])&metaPage == 0 {
		return boltMeta{}, false
	}
	m := p[pageHeaderSize : pageHeaderSize+metaSize]
	if le.Uint32(m[0:]) != boltMagic || le.Uint32(m[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(m[:metaSumSize])
	if h.Sum64() != le.Uint64(m[metaSumSize:]) {
		return boltMeta{}, false
	}
	ps := uint64(le.Uint32(m[8:]))
	if ps < 512 || ps > 1<<20 || ps&(ps-1) != 0 {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: ps, root: le.Uint64(m[16:]), highWater: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
}

// openBolt picks the newest valid meta page, as bbolt does: page 0, or
// page 1 (found at the page size page 0 names, or, when page 0 is torn,
// at each page size bbolt may have used).
func openBolt(data []byte) (*boltFile, uint64, error) {
	if len(data) == 0 {
		return nil, 0, corrupt("empty file")
	}
	m0, ok0 := parseMeta(data, 0)
	sizes := []uint64{m0.pageSize}
	if !ok0 {
		sizes = []uint64{4096, 8192, 16384, 32768, 65536, 512, 1024, 2048}
	}
	best, found := m0, ok0
	for _, ps := range sizes {
		if m1, ok := parseMeta(data, ps); ok && m1.pageSize == ps && (!found || m1.txid > best.txid) {
			best, found = m1, true
		}
	}
	if !found {
		return nil, 0, corrupt("no valid meta page")
	}
	return &boltFile{data: data, pageSize: best.pageSize, maxPage: best.highWater, seen: map[uint64]bool{}}, best.root, nil
}

// page is the bytes of page id (with its overflow pages), checked.
func (b *boltFile) page(id uint64) ([]byte, error) {
	if id < 2 || id >= b.maxPage {
		return nil, corrupt("page %d outside 2..%d", id, b.maxPage)
	}
	if b.seen[id] {
		return nil, corrupt("page %d reached twice", id)
	}
	b.seen[id] = true
	off := id * b.pageSize
	if off/b.pageSize != id || off+pageHeaderSize > uint64(len(b.data)) {
		return nil, corrupt("page %d beyond the file's %d bytes", id, len(b.data))
	}
	if got := le.Uint64(b.data[off:]); got != id {
		return nil, corrupt("page %d says it is page %d", id, got)
	}
	span := (uint64(le.Uint32(b.data[off+12:])) + 1) * b.pageSize
	if span > uint64(len(b.data))-off {
		return nil, corrupt("page %d overflows the file", id)
	}
	return b.data[off : off+span], nil
}

// kv is one leaf element.
type kv struct {
	key, value []byte
	flags      uint32
}

// each calls fn for every leaf element of the tree rooted at page id.
func (b *boltFile) each(id uint64, depth int, fn func(kv) error) error {
	if depth > maxDepth {
		return corrupt("tree deeper than %d", maxDepth)
	}
	p, err := b.page(id)
	if err != nil {
		return err
	}
	switch flags := le.Uint16(p[8:]); {
	case flags&branchPage != 0:
		n := uint64(le.Uint16(p[10:]))
		if pageHeaderSize+n*elementSize > uint64(len(p)) {
			return corrupt("page %d: %d elements overflow it", id, n)
		}
		for i := range n {
			e := p[pageHeaderSize+i*elementSize:]
			if err := b.each(le.Uint64(e[8:]), depth+1, fn); err != nil {
				return err
			}
		}
		return nil
	case flags&leafPage != 0:
		return leafElements(p, fn)
	default:
		return corrupt("page %d: neither branch nor leaf (flags %#x)", id, flags)
	}
}

// leafElements calls fn for each element of the leaf page p (a page of
// the file, or a bucket's inline page).
func leafElements(p []byte, fn func(kv) error) error {
	if len(p) < pageHeaderSize || le.Uint16(p[8:])&leafPage == 0 {
		return corrupt("not a leaf page")
	}
	n := uint64(le.Uint16(p[10:]))
	size := uint64(len(p))
	if pageHeaderSize+n*elementSize > size {
		return corrupt("leaf: %d elements overflow the page", n)
	}
	for i := range n {
		at := pageHeaderSize + i*elementSize
		e := p[at:]
		k := at + uint64(le.Uint32(e[4:]))
		v := k + uint64(le.Uint32(e[8:]))
		end := v + uint64(le.Uint32(e[12:]))
		if end > size {
			return corrupt("leaf element %d beyond its page", i)
		}
		if err := fn(kv{key: p[k:v], value: p[v:end], flags: le.Uint32(e[0:])}); err != nil {
			return err
		}
	}
	return nil
}

// bucket calls fn for each key and value of the bucket whose value (in
// its parent) is v: a tree of its own, or inline, its leaf page after the
// bucket header.
func (b *boltFile) bucket(v []byte, fn func(kv) error) error {
	if len(v) < bucketHdrSz {
		return corrupt("bucket value of %d bytes", len(v))
	}
	if root := le.Uint64(v); root != 0 {
		return b.each(root, 0, fn)
	}
	return leafElements(v[bucketHdrSz:], fn)
}

// readBuckets calls fn with each key and value of the named top-level
// buckets, one bucket after the other in the order named (a missing
// bucket has none), and stops at fn's first error. Nothing is gathered
// on the way: what fn keeps is all the read holds. Nested buckets are
// not read.
func readBuckets(data []byte, names []string, fn func(bucket string, e kv) error) error {
	b, root, err := openBolt(data)
	if err != nil {
		return err
	}
	values := make([][]byte, len(names))
	err = b.each(root, 0, func(e kv) error {
		for i, n := range names {
			if string(e.key) == n && e.flags&bucketLeaf != 0 {
				values[i] = e.value
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, n := range names {
		if values[i] == nil {
			continue
		}
		var stopped error // fn's own error: passed on as it is
		err := b.bucket(values[i], func(e kv) error {
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
