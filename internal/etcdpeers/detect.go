package etcdpeers

// This file holds Detect: what enable_network_magic reads of etcd's data
// directory, the node's name, and what an earlier run left in /run.

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
)

const (
	// EtcdManifest is kubeadm's static pod of etcd: only control planes
	// have one.
	EtcdManifest = "/etc/kubernetes/manifests/etcd.yaml"
	// DefaultDataDir is kubeadm's etcd data directory.
	DefaultDataDir = "/var/lib/etcd"
	// dbInDataDir is etcd's backend file under its data directory.
	dbInDataDir = "member/snap/db"
	// LimitDB is the most read of the backend file, whatever its size:
	// it is read by pages (system.Open), the meta pages and the trees of
	// the root and membership buckets only, a few KiB on a kind cluster
	// and about 2 MiB for the largest membership read (MaxMembers
	// records of maxRecord bytes, maxRemoved IDs). etcd's file does not
	// shrink, and its size no longer matters; a corrupt file that leads
	// the walk further stops here, and the node boots as the script's
	// would (a WARN says why).
	LimitDB = 16 << 20
	// PeersFile is the membership the unit's command maps, written at
	// boot: /run, like the unit, is new on every start.
	PeersFile = "/run/kind-etcd-peers.json"
)

// Facts are what Detect found.
type Facts struct {
	// Hostname is the node's name, which kubeadm gave its member.
	Hostname string
	// DB is etcd's backend file; "" on a node without an etcd manifest
	// (a worker), where nothing else is read.
	DB string
	// Present: DB exists (kubeadm has run).
	Present bool
	Members []Member
	// Err says why the membership could not be read.
	Err error
	// Peers is PeersFile as it is (nil when missing); Installed, what
	// is there of the unit (whatever the binary: Plan compares).
	Peers     []byte
	Installed plan.Installed
}

// Detect reads the membership of a control plane's etcd, before etcd
// runs. Nothing it finds is fatal: a node whose membership cannot be
// read boots as the script's does (Plan warns).
func Detect(sys system.System, hostname string) Facts {
	return detect(sys, hostname, LimitDB)
}

// detect is Detect with the limit on what is read of the backend file.
func detect(sys system.System, hostname string, limit int) Facts {
	f := Facts{Hostname: hostname}
	manifest, err := sys.ReadFile(EtcdManifest, system.LimitConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return f
	}
	if err != nil {
		// A control plane whose manifest cannot be read: said, not
		// taken as a worker.
		f.DB, f.Present, f.Err = EtcdManifest, true, err
		return f
	}
	dir, err := DataDir(manifest)
	if err != nil {
		// A --data-dir that cannot be read: said, never taken as
		// kubeadm's default (the feature would be skipped unsaid).
		f.DB, f.Present, f.Err = EtcdManifest, true, fmt.Errorf("%s: %w", EtcdManifest, err)
		return f
	}
	f.DB = path.Join(dir, dbInDataDir)
	db, err := sys.Open(f.DB, limit)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f
	case err != nil:
		f.Present, f.Err = true, err
		return f
	}
	f.Present = true
	f.Members, err = ReadMembersAt(db, db.Size())
	db.Close()
	if err != nil {
		f.Err = fmt.Errorf("%s: %w", f.DB, err)
	}
	// nil when it cannot be read: what Plan then writes anew.
	if b, err := sys.ReadFile(PeersFile, system.LimitConfig); err == nil {
		f.Peers = b
	}
	f.Installed = Unit(plan.DefaultExecutable).Installed(sys)
	return f
}
