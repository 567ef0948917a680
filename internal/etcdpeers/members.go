package etcdpeers

// This file holds the membership: what etcd's backend records of each
// member, read from its "members" and "members_removed" buckets (etcd
// v3.5+, server/storage/schema/membership.go).

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// Limits of the membership read: etcd refuses clusters far smaller, and
// a member's record is a few hundred bytes.
//
// maxRemoved bounds members_removed, where etcd keeps the ID of every
// member ever removed, for good. A kind cluster adds none by restarting
// (a node keeps its data directory, so its member ID); one is added each
// time someone replaces a control plane by hand, so 16384 is one a day
// for forty years, in a set of about half a MiB. Past it the read
// fails, naming the cap: an ID left out of the set would make a removed
// member a peer to redirect to.
const (
	MaxMembers    = 64
	maxRemoved    = 1 << 14
	maxRecord     = 16 << 10
	maxPeerURLs   = 8
	membersBucket = "members"
	removedBucket = "members_removed"
)

// Member is one member as etcd's backend records it.
type Member struct {
	ID uint64 `json:"-"`
	// Name is the member's name, published by the member itself once it
	// started (kubeadm names it after the node; empty before it ever ran).
	Name     string   `json:"name,omitempty"`
	PeerURLs []string `json:"peerURLs"`
	Learner  bool     `json:"isLearner,omitempty"`
}

// PeerAddrs are the member's peer URLs as addresses; a URL that names a
// host rather than an address cannot be redirected by address and is
// left out (err names it).
func (m Member) PeerAddrs() (out []netip.AddrPort, err error) {
	for _, u := range m.PeerURLs {
		a, perr := parsePeerURL(u)
		if perr != nil {
			err = perr
			continue
		}
		out = append(out, a)
	}
	return out, err
}

func parsePeerURL(s string) (netip.AddrPort, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return netip.AddrPort{}, fmt.Errorf("peer URL %q: not http(s)://ADDRESS:PORT", s)
	}
	a, err := netip.ParseAddr(u.Hostname())
	if err != nil || a.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("peer URL %q: %q is not an IP address", s, u.Hostname())
	}
	port, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil || port == 0 {
		return netip.AddrPort{}, fmt.Errorf("peer URL %q: no port", s)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), nil
}

// validName is what a member name must be to be looked up and written
// into a unit: a DNS name (kind's node names are), no specifier, quote or
// blank.
func validName(s string) bool {
	return s != "" && len(s) <= 253 && !strings.ContainsFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_')
	})
}

// ReadMembersAt reads the current members of etcd's backend file (r, of
// size bytes, read by pages), sorted by name then ID: members_removed are
// left out. Each record is handled as the walk reaches it, so that what
// the read holds is bounded by MaxMembers and maxRemoved, not by the
// file's size.
func ReadMembersAt(r io.ReaderAt, size int64) ([]Member, error) {
	removed := map[uint64]bool{}
	var out []Member
	// members_removed first: a member is counted only once it is known
	// not to be one of them.
	err := readBuckets(r, size, []string{removedBucket, membersBucket}, func(bucket string, e kv) error {
		id, err := strconv.ParseUint(string(e.key), 16, 64)
		if bucket == removedBucket {
			if err != nil || removed[id] {
				return nil
			}
			if len(removed) == maxRemoved {
				return fmt.Errorf("more than %d removed member IDs", maxRemoved)
			}
			removed[id] = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("page %d: the member key of %d bytes before offset %d is not a hex member ID", e.page, len(e.key), e.off)
		}
		if removed[id] {
			return nil
		}
		if len(out) == MaxMembers {
			return fmt.Errorf("more than %d members", MaxMembers)
		}
		m, err := parseMember(e.value)
		if err != nil {
			return fmt.Errorf("member %x, its record at offset %d (page %d): %w", id, e.off, e.page, err)
		}
		m.ID = id
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Member) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// parseMember reads one member's record. Its errors say what was wrong
// and where, never what the record holds: a torn page leaves a record
// that runs into stale data of another bucket, a Secret's included, and
// encoding/json's errors quote the input (a character, a number).
func parseMember(v []byte) (Member, error) {
	if len(v) > maxRecord {
		return Member{}, fmt.Errorf("record of %d bytes, more than %d", len(v), maxRecord)
	}
	var m Member
	if err := json.Unmarshal(v, &m); err != nil {
		return Member{}, fmt.Errorf("record of %d bytes: %s", len(v), system.JSONDamage(err, "a member record", "name", "peerURLs", "isLearner"))
	}
	if len(m.PeerURLs) > maxPeerURLs {
		return Member{}, fmt.Errorf("%d peer URLs, more than %d", len(m.PeerURLs), maxPeerURLs)
	}
	return m, nil
}

// clip is at most 64 bytes of b, for an error. Only for inputs that
// hold no secret (the peers file entrypoint writes): never for etcd's
// database.
func clip(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}
