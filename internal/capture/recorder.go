package capture

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Access says how a path was read; one path may be read several ways.
type Access uint8

const (
	Read  Access = 1 << iota // ReadFile
	Stat                     // Stat (follows symlinks)
	Lstat                    // Lstat (does not)
	List                     // ReadDir
	Link                     // Readlink
	Pages                    // Open: read at offsets
)

func (a Access) String() string {
	var parts []string
	for _, x := range []struct {
		a    Access
		name string
	}{{Read, "read"}, {Stat, "stat"}, {Lstat, "lstat"}, {List, "list"}, {Link, "readlink"}, {Pages, "read by pages"}} {
		if a&x.a != 0 {
			parts = append(parts, x.name)
		}
	}
	return strings.Join(parts, ",")
}

// ErrReadOnly is the error of every change asked of a Recorder.
var ErrReadOnly = errors.New("read-only: capturing changes nothing")

// memo is one probe's answer, computed once.
type memo[T any] struct {
	once sync.Once
	done atomic.Bool // set once v and err are
	v    T
	err  error
}

func (m *memo[T]) get(fn func() (T, error)) (T, error) {
	m.once.Do(func() {
		m.v, m.err = fn()
		m.done.Store(true)
	})
	return m.v, m.err
}

// memoFor returns the memo of key in m, making it under mu.
func memoFor[T any](mu *sync.Mutex, m map[string]*memo[T], key string) *memo[T] {
	mu.Lock()
	defer mu.Unlock()
	e, ok := m[key]
	if !ok {
		e = &memo[T]{}
		m[key] = e
	}
	return e
}

// Recorder is a system.System that reads and probes through another one,
// recording every path and answer, and refuses every change.
type Recorder struct {
	sys system.System

	mu      sync.Mutex
	paths   map[string]Access
	limits  map[string]int // the largest read limit asked of each path (ReadFile, Open)
	fstypes map[string]*memo[string]
	nofile  memo[uint64]
	overlay memo[struct{}]
	lookups map[string]*memo[[]netip.Addr] // "network\x00host"
	runs    map[string]*memo[output]       // argv joined by NUL
	env     map[string]*string             // nil value: looked up, unset
}

var _ system.System = (*Recorder)(nil)

// NewRecorder records what is read of sys.
func NewRecorder(sys system.System) *Recorder {
	return &Recorder{
		sys:     sys,
		paths:   map[string]Access{},
		limits:  map[string]int{},
		fstypes: map[string]*memo[string]{},
		lookups: map[string]*memo[[]netip.Addr]{},
		runs:    map[string]*memo[output]{},
		env:     map[string]*string{},
	}
}

// record records p as read a way, and the largest read limit asked of it
// (0 for a way that reads no bytes).
func (r *Recorder) record(p string, a Access, limit int) {
	r.mu.Lock()
	r.paths[p] |= a
	r.limits[p] = max(r.limits[p], limit)
	r.mu.Unlock()
}

func (r *Recorder) ReadFile(p string, limit int) ([]byte, error) {
	r.record(p, Read, limit)
	return r.sys.ReadFile(p, limit)
}

// Open records p as read by pages, with its limit on the bytes read. Not
// the pages themselves: the only file read so is etcd's database, which
// capture archives as a file of its membership (see Archive).
func (r *Recorder) Open(p string, limit int) (system.File, error) {
	r.record(p, Pages, limit)
	return r.sys.Open(p, limit)
}

// ReadLimit is the largest limit a read of p asked for (0: never read).
func (r *Recorder) ReadLimit(p string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limits[p]
}

func (r *Recorder) Stat(p string) (fs.FileInfo, error) {
	r.record(p, Stat, 0)
	return r.sys.Stat(p)
}

func (r *Recorder) Lstat(p string) (fs.FileInfo, error) {
	r.record(p, Lstat, 0)
	return r.sys.Lstat(p)
}

func (r *Recorder) ReadDir(p string) ([]fs.DirEntry, error) {
	r.record(p, List, 0)
	return r.sys.ReadDir(p)
}

func (r *Recorder) Readlink(p string) (string, error) {
	r.record(p, Link, 0)
	return r.sys.Readlink(p)
}

func (r *Recorder) FSType(p string) (string, error) {
	return memoFor(&r.mu, r.fstypes, p).get(func() (string, error) { return r.sys.FSType(p) })
}

func (r *Recorder) NofileHard() (uint64, error) {
	return r.nofile.get(r.sys.NofileHard)
}

func (r *Recorder) OverlayTrial() error {
	_, err := r.overlay.get(func() (struct{}, error) { return struct{}{}, r.sys.OverlayTrial() })
	return err
}

func (r *Recorder) LookupIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return memoFor(&r.mu, r.lookups, network+"\x00"+host).get(func() ([]netip.Addr, error) {
		return r.sys.LookupIP(ctx, network, host)
	})
}

// Run runs a command once per argv; the steps' Detect functions only run
// read-only ones (iptables-save). Standard input is not part of the key:
// Detect gives none.
func (r *Recorder) Run(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) ([]byte, []byte, error) {
	if len(argv) == 0 {
		return nil, nil, errors.New("run: empty argv")
	}
	o, err := memoFor(&r.mu, r.runs, strings.Join(argv, "\x00")).get(func() (output, error) {
		stdout, stderr, err := r.sys.Run(ctx, argv, stdin, timeout)
		return output{stdout, stderr}, err
	})
	return o.stdout, o.stderr, err
}

// output is what a command printed; the archive keeps standard output
// (run/NAME), which is all a Detect function reads.
type output struct{ stdout, stderr []byte }

func readOnly(op, p string) error { return &fs.PathError{Op: op, Path: p, Err: ErrReadOnly} }

func (r *Recorder) WriteFile(p string, _ []byte, _ fs.FileMode) error { return readOnly("write", p) }
func (r *Recorder) WriteFileInPlace(p string, _ []byte) error         { return readOnly("write", p) }
func (r *Recorder) MkdirAll(p string, _ fs.FileMode) error            { return readOnly("mkdir", p) }
func (r *Recorder) Remove(p string) error                             { return readOnly("remove", p) }
func (r *Recorder) Symlink(_, p string) error                         { return readOnly("symlink", p) }
func (r *Recorder) Chown(p string, _, _ int) error                    { return readOnly("chown", p) }
func (r *Recorder) Chmod(p string, _ fs.FileMode) error               { return readOnly("chmod", p) }
func (r *Recorder) Unmount(p string, _ int) error                     { return readOnly("umount", p) }
func (r *Recorder) Sync()                                             {}

func (r *Recorder) Mount(_, target, _ string, _ system.MountFlags, _ string) error {
	return readOnly("mount", target)
}

// Rand passes on the randomness a replayed host (system.Tree) records, so
// that boot.Detect finds it through the Recorder too.
func (r *Recorder) Rand() (io.Reader, error) {
	if rs, ok := r.sys.(interface{ Rand() (io.Reader, error) }); ok {
		return rs.Rand()
	}
	return nil, nil
}

// Env wraps lookupEnv, recording every variable looked up through it.
func (r *Recorder) Env(lookupEnv func(string) (string, bool)) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := lookupEnv(k)
		r.mu.Lock()
		defer r.mu.Unlock()
		if ok {
			r.env[k] = &v
		} else if _, seen := r.env[k]; !seen {
			r.env[k] = nil
		}
		return v, ok
	}
}

// Paths returns every path read, with how.
func (r *Recorder) Paths() map[string]Access {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.paths)
}

// envSeen is every variable looked up through Env; nil for one unset.
func (r *Recorder) envSeen() map[string]*string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.env)
}
