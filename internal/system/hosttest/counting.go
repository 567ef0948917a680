package hosttest

import (
	"maps"
	"sync"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Reads are what a run read of one file, through the System seam.
type Reads struct {
	// Whole: ReadFile calls, each the whole file (up to its limit).
	Whole int
	// Opens: Open calls, each followed by the reads at offsets of
	// Pages calls returning Bytes in all.
	Opens, Pages int
	Bytes        int64
}

// Readings is one reading per ReadFile and one per Open (whatever the
// number of pages then read at offsets): the count that "each input is
// read once per run" holds to.
func (r Reads) Readings() int { return r.Whole + r.Opens }

// Counting is a System that counts, by path, every ReadFile, Open and
// ReadAt on an opened file; the rest goes to the System under it.
type Counting struct {
	system.System
	mu    sync.Mutex
	reads map[string]Reads
}

// NewCounting counts the reads of sys.
func NewCounting(sys system.System) *Counting {
	return &Counting{System: sys, reads: map[string]Reads{}}
}

// Reads are the counts of path p (zero: never read).
func (c *Counting) Reads(p string) Reads {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[p]
}

// Paths are the paths read, with their counts.
func (c *Counting) Paths() map[string]Reads {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.reads)
}

func (c *Counting) count(p string, f func(*Reads)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reads[p]
	f(&r)
	c.reads[p] = r
}

func (c *Counting) ReadFile(p string, limit int) ([]byte, error) {
	c.count(p, func(r *Reads) { r.Whole++ })
	return c.System.ReadFile(p, limit)
}

func (c *Counting) Open(p string, limit int) (system.File, error) {
	c.count(p, func(r *Reads) { r.Opens++ })
	f, err := c.System.Open(p, limit)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, c: c, p: p}, nil
}

// countedFile counts the reads at offsets of a file Counting opened.
type countedFile struct {
	system.File
	c *Counting
	p string
}

func (f *countedFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	f.c.count(f.p, func(r *Reads) { r.Pages++; r.Bytes += int64(n) })
	return n, err
}
