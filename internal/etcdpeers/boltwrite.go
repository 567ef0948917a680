package etcdpeers

// This file holds MembersDB: a bbolt file that holds only a membership.
// capture archives it in place of etcd's database (which holds the
// cluster's Secrets), so that a replay reads the same names and URLs
// through the same reader.

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

const writePageSize = 4096

// MembersDB is a bbolt file whose "members" bucket holds members, each
// record as etcd writes it (JSON, keyed by the hex ID), and whose
// "members_removed" bucket is empty.
func MembersDB(members []Member) []byte {
	var recs []kv
	for _, m := range members {
		type record struct {
			ID uint64 `json:"id"`
			Member
		}
		v, _ := json.Marshal(record{m.ID, m}) // plain strings and bools: cannot fail
		recs = append(recs, kv{key: []byte(strconv.FormatUint(m.ID, 16)), value: v})
	}
	slices.SortFunc(recs, func(a, b kv) int { return slices.Compare(a.key, b.key) })
	return membershipFile(recs, nil)
}

// membershipFile is a bbolt file whose two buckets hold the elements
// given, as they are, each inline in the root bucket's page.
func membershipFile(members, removed []kv) []byte {
	inline := func(items []kv) []byte {
		return append(make([]byte, bucketHdrSz), leaf(0, items)...)
	}
	root := leaf(3, []kv{
		{key: []byte(membersBucket), value: inline(members), flags: bucketLeaf},
		{key: []byte(removedBucket), value: inline(removed), flags: bucketLeaf},
	})
	pages := (len(root) + writePageSize - 1) / writePageSize
	le.PutUint32(root[12:], uint32(pages-1)) // overflow
	out := make([]byte, (3+pages)*writePageSize)
	for i := range 2 {
		writeMeta(out[i*writePageSize:], uint64(i), uint64(3+pages))
	}
	free := out[2*writePageSize:]
	le.PutUint64(free, 2)
	le.PutUint16(free[8:], 0x10) // freelist, empty
	copy(out[3*writePageSize:], root)
	return out
}

// leaf is a leaf page of id holding items: the elements, then each key
// and value, an element's pos counted from the element itself.
func leaf(id uint64, items []kv) []byte {
	p := make([]byte, pageHeaderSize+len(items)*elementSize)
	le.PutUint64(p, id)
	le.PutUint16(p[8:], leafPage)
	le.PutUint16(p[10:], uint16(len(items)))
	for i, it := range items {
		at := pageHeaderSize + i*elementSize
		e := p[at:]
		le.PutUint32(e[0:], it.flags)
		le.PutUint32(e[4:], uint32(len(p)-at))
		le.PutUint32(e[8:], uint32(len(it.key)))
		le.PutUint32(e[12:], uint32(len(it.value)))
		p = append(append(p, it.key...), it.value...)
	}
	return p
}

func writeMeta(p []byte, txid, highWater uint64) {
	le.PutUint64(p, txid) // page id: 0 and 1
	le.PutUint16(p[8:], metaPage)
	m := p[pageHeaderSize:]
	le.PutUint32(m[0:], boltMagic)
	le.PutUint32(m[4:], boltVersion)
	le.PutUint32(m[8:], writePageSize)
	le.PutUint64(m[16:], 3) // root bucket's page
	le.PutUint64(m[32:], 2) // freelist
	le.PutUint64(m[40:], highWater)
	le.PutUint64(m[48:], txid)
	h := fnv.New64a()
	h.Write(m[:metaSumSize])
	le.PutUint64(m[metaSumSize:], h.Sum64())
}

// IsBackend reports whether p is an etcd data directory's backend file.
func IsBackend(p string) bool { return strings.HasSuffix(p, "/"+dbInDataDir) }
