package etcdpeers

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
)

// countingReader counts the bytes asked of r.
type countingReader struct {
	r    io.ReaderAt
	read atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.read.Add(int64(len(p)))
	return c.r.ReadAt(p, off)
}

// zeros is a file of n zero bytes after head, never held.
type zeros struct {
	head []byte
	n    int64
}

func (z zeros) size() int64 { return int64(len(z.head)) + z.n }

func (z zeros) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	if off < int64(len(z.head)) {
		n = copy(p, z.head[off:])
	}
	rest := min(int64(len(p)-n), z.size()-off-int64(n))
	clear(p[n : n+int(max(rest, 0))])
	n += int(max(rest, 0))
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestReadsPages: the membership of a file of 1 GiB (a valid file, then
// free space) reads the meta pages and the root bucket's page, a few KiB:
// what the read costs does not grow with the file.
func TestReadsPages(t *testing.T) {
	db := fixture(t, "three-members")
	for _, pad := range []int64{0, 1 << 30} {
		r := &countingReader{r: zeros{db, pad}}
		ms, err := ReadMembersAt(r, int64(len(db))+pad)
		if err != nil || len(ms) != 3 {
			t.Fatalf("%d bytes of padding: %v, %v", pad, ms, err)
		}
		if n := r.read.Load(); n > 64<<10 {
			t.Errorf("%d bytes of padding: %d bytes read, want the few pages of the membership", pad, n)
		}
	}
}

// TestSpanCap: an overflow count read from a torn page of a huge file
// (within it, so not past its end) sizes no buffer beyond maxSpan; the
// error names the page and the bound, none of the file's bytes.
func TestSpanCap(t *testing.T) {
	db := MembersDB(three)
	le.PutUint32(db[3*writePageSize+12:], 1<<20) // the root page's overflow: 4 GiB
	_, err := ReadMembersAt(zeros{db, 8 << 30}, int64(len(db))+8<<30)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "page 3 (offset 12288): 4294971392 bytes with its overflow pages, more than the 4194304") {
		t.Fatalf("error %v, want the span's bound", err)
	}
}

// TestShrunk: a file that ends before the size it had when opened (etcd
// truncated it while it was read) is an error saying so, not a page read
// as zeros.
func TestShrunk(t *testing.T) {
	db := MembersDB(three)
	_, err := ReadMembersAt(bytes.NewReader(db[:3*writePageSize+100]), int64(len(db)))
	if err == nil || !strings.Contains(err.Error(), "page 3: the file ends at offset 12388") {
		t.Fatalf("error %v, want the file's end named", err)
	}
}

// failing fails every read after the first n bytes.
type failing struct {
	r    io.ReaderAt
	left int
}

var errLimit = errors.New("the limit")

func (f *failing) ReadAt(p []byte, off int64) (int, error) {
	if f.left -= len(p); f.left < 0 {
		return 0, errLimit
	}
	return f.r.ReadAt(p, off)
}

// TestReadError: the reader's own error (the limit of system.Open) is
// passed on, wrapped with where, and never taken for a torn page.
func TestReadError(t *testing.T) {
	db := MembersDB(three)
	for _, n := range []int{0, 100, 200} {
		_, err := ReadMembersAt(&failing{bytes.NewReader(db), n}, int64(len(db)))
		if !errors.Is(err, errLimit) || errors.Is(err, ErrCorrupt) {
			t.Errorf("after %d bytes: %v, want errLimit", n, err)
		}
	}
}

// wideDB is a file whose root bucket is a branch page of n children,
// each an empty leaf spanning 1 MiB with its overflow pages: a walk
// through it reads n MiB, the most a corrupt file can lead it to.
func wideDB(n int) []byte {
	const span = 1 << 20 / writePageSize
	db := MembersDB(nil)[:3*writePageSize]
	high := uint64(4 + n*span)
	for i := range 2 {
		writeMeta(db[i*writePageSize:], uint64(i), high)
	}
	db = append(db, make([]byte, (int(high)-3)*writePageSize)...)
	root := db[3*writePageSize:]
	le.PutUint64(root, 3)
	le.PutUint16(root[8:], branchPage)
	le.PutUint16(root[10:], uint16(n))
	for k := range n {
		id := uint64(4 + k*span)
		le.PutUint64(root[pageHeaderSize+k*elementSize+8:], id)
		p := db[id*writePageSize:]
		le.PutUint64(p, id)
		le.PutUint16(p[8:], leafPage)
		le.PutUint32(p[12:], span-1)
	}
	return db
}

// TestReadCap: a file that leads the walk through more than LimitDB of
// pages stops at it, an error naming it, having read no more.
func TestReadCap(t *testing.T) {
	tree := hostTree(t, map[string]string{
		"etc/kubernetes/manifests/etcd.yaml": manifest,
		"var/lib/etcd/member/snap/db":        string(wideDB(LimitDB>>20 + 4)),
	})
	var f Facts
	n := bytesPerRun(2, func() { f = Detect(tree, "kind-control-plane") })
	if f.Err == nil || !strings.Contains(f.Err.Error(), "reading more than the 16777216-byte limit") {
		t.Fatalf("error %v, want the limit on what is read", f.Err)
	}
	if n > LimitDB+1<<20 {
		t.Errorf("%d bytes allocated, more than the %d-byte limit and a page", n, LimitDB)
	}
}
