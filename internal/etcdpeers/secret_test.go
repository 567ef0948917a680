package etcdpeers

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// Marker is what the broken databases hold where a Secret would be: in
// the key bucket, in stale pages, and in the very bytes each break
// damages. No error of the reader may show it, in any form.
const Marker = "SECRET-MARKER-7f3a"

// markerForms are the forms an error could show the marker's bytes in:
// as they are, quoted, in hex, and as the numbers a header field read
// from any 4 or 8 of them would print (every 4 printable ASCII bytes
// are a number above 538 million, far above any offset of a test file).
func markerForms() []string {
	m := []byte(Marker)
	forms := []string{Marker, strconv.Quote(Marker), fmt.Sprintf("%x", m), Marker[:8], Marker[len(Marker)-8:]}
	for i := 0; i+4 <= len(m); i++ {
		v := binary.LittleEndian.Uint32(m[i:])
		forms = append(forms, strconv.FormatUint(uint64(v), 10), fmt.Sprintf("%x", v))
		if i+8 <= len(m) {
			w := binary.LittleEndian.Uint64(m[i:])
			forms = append(forms, strconv.FormatUint(w, 10), fmt.Sprintf("%x", w))
		}
	}
	return forms
}

// quotesMarker is the first form of the marker s holds, "" when none.
func quotesMarker(s string) string {
	for _, f := range markerForms() {
		if strings.Contains(s, f) {
			return f
		}
	}
	return ""
}

// staleSecret is the bytes of a Secret as etcd's key bucket holds it (a
// protobuf KeyValue, roughly): what a torn members page runs into.
var staleSecret = []byte("\x0a\x1f/registry/secrets/default/db-pass\x12\x08password\x1a\x12" + Marker + "\x20\x01")

// branch is a branch page of id whose elements point at children.
func branch(id uint64, children ...uint64) []byte {
	p := make([]byte, pageHeaderSize+len(children)*elementSize)
	le.PutUint64(p, id)
	le.PutUint16(p[8:], branchPage)
	le.PutUint16(p[10:], uint16(len(children)))
	for i, c := range children {
		le.PutUint64(p[pageHeaderSize+i*elementSize+8:], c)
	}
	return p
}

// pagedFile is a bbolt file of pages 3, 4, ... as given, page 3 the
// root bucket's; a page longer than one takes the next ones as its
// overflow.
func pagedFile(pages ...[]byte) []byte {
	span := func(p []byte) int { return max(1, (len(p)+writePageSize-1)/writePageSize) }
	n := 3
	for _, p := range pages {
		n += span(p)
	}
	out := make([]byte, n*writePageSize)
	for i := range 2 {
		writeMeta(out[i*writePageSize:], uint64(i), uint64(n))
	}
	le.PutUint64(out[2*writePageSize:], 2)
	le.PutUint16(out[2*writePageSize+8:], 0x10)
	id := 3
	for _, p := range pages {
		at := out[id*writePageSize:]
		copy(at, p)
		if span(p) > 1 {
			le.PutUint32(at[12:], uint32(span(p)-1))
		}
		id += span(p)
	}
	return out
}

// secretDB is a database as etcd leaves it, the Secrets' bytes included:
// the root page (3) holds the key bucket inline (a Secret) and the
// members bucket, whose root is a branch page (4) over one leaf (5) of
// the records given; page 6 is a free page of stale key data.
func secretDB(records []kv) []byte {
	bucketAt := func(root uint64) []byte { v := make([]byte, bucketHdrSz); le.PutUint64(v, root); return v }
	inline := func(items []kv) []byte { return append(bucketAt(0), leaf(0, items)...) }
	root := leaf(3, []kv{
		{key: []byte("key"), value: inline([]kv{{key: []byte("/registry/secrets/default/db-pass"), value: staleSecret}}), flags: bucketLeaf},
		{key: []byte(membersBucket), value: bucketAt(4), flags: bucketLeaf},
		{key: []byte(removedBucket), value: inline(nil), flags: bucketLeaf},
	})
	stale := bytes.Repeat(staleSecret, writePageSize/len(staleSecret))
	return pagedFile(root, branch(4, 5), leaf(5, records), stale)
}

const (
	membersLeaf   = 5 * writePageSize // page 5
	membersBranch = 4 * writePageSize // page 4
	firstElement  = membersLeaf + pageHeaderSize
)

var goodRecords = []kv{
	{key: []byte("2d1b3f2a0c0e4a11"), value: []byte(`{"id":3250291049830025745,"name":"kind-control-plane","peerURLs":["https://172.18.0.3:2380"]}`)},
	{key: []byte("5a8e0b1f3c2d4e22"), value: []byte(`{"id":6524155000012373538,"name":"kind-control-plane2","peerURLs":["https://172.18.0.5:2380"]}`)},
}

// with is goodRecords with the second record's key or value replaced.
func with(key, value string) []kv {
	out := []kv{goodRecords[0], goodRecords[1]}
	if key != "" {
		out[1].key = []byte(key)
	}
	if value != "" {
		out[1].value = []byte(value)
	}
	return out
}

// patch is db with b written at off.
func patch(db []byte, off int, b []byte) []byte {
	db = bytes.Clone(db)
	copy(db[off:], b)
	return db
}

// SecretBreaks are databases holding the marker, each broken in one
// way the reader reports, by name; want is what the error must say.
func secretBreaks() []struct {
	name, want string
	db         []byte
} {
	good := secretDB(goodRecords)
	m := []byte(Marker)
	// The record runs into a Secret's value: the marker within the first
	// 64 bytes, which an error once quoted.
	torn := string(goodRecords[1].value[:30]) + "\x12\x08password\x12\x24" + Marker + string(staleSecret)
	urls := strings.Repeat(`"https://`+Marker+`:1",`, 9)
	return []struct {
		name, want string
		db         []byte
	}{
		{"torn-record", "not JSON (a syntax error at byte", secretDB(with("", torn))},
		{"bad-json", "not JSON", secretDB(with("", `{"name":"a",`+Marker+`}`))},
		{"wrong-type-name", "field name of the wrong type", secretDB(with("", `{"name":["`+Marker+`"]}`))},
		{"wrong-type-urls", "field peerURLs of the wrong type", secretDB(with("", `{"peerURLs":"`+Marker+`"}`))},
		{"wrong-type-number", "field name of the wrong type", secretDB(with("", `{"name":1234567890123456789}`))},
		{"key-not-hex", "not a hex member ID", secretDB(with(Marker, ""))},
		{"record-too-large", "more than 16384", secretDB(with("", `{"name":"`+strings.Repeat(Marker, maxRecord/len(Marker)+1)+`"}`))},
		{"too-many-urls", "9 peer URLs", secretDB(with("", `{"peerURLs":[`+urls[:len(urls)-1]+`]}`))},
		{"page-id-torn", "its header names another page", patch(good, membersLeaf, m[:8])},
		{"page-flags-torn", "page 5", patch(good, membersLeaf+8, []byte{0x40, 0x40})},
		{"leaf-count-torn", "element count overflows", patch(good, membersLeaf+10, m[:2])},
		{"branch-count-torn", "element count overflows", patch(good, membersBranch+10, m[:2])},
		{"branch-child-torn", "names a page outside", patch(good, membersBranch+pageHeaderSize+8, m[:8])},
		{"branch-child-loop", "reached twice", patch(good, membersBranch+pageHeaderSize+8, []byte{3, 0, 0, 0, 0, 0, 0, 0})},
		{"element-past-page", "runs past its page", patch(good, firstElement+elementSize+12, m[:4])},
		{"overflow-past-end", "overflow count runs past", patch(good, membersLeaf+12, m[:4])},
		{"bucket-root-torn", "names a page outside", patch(good, bucketValueOff(good, membersBucket), m[:8])},
		{"truncated", "beyond the file", good[:5*writePageSize+8]},
	}
}

// bucketValueOff is the file offset of the named bucket's value in the
// root page of db.
func bucketValueOff(db []byte, name string) int {
	p := db[3*writePageSize:]
	for i := range int(le.Uint16(p[10:])) {
		at := pageHeaderSize + i*elementSize
		k := at + int(le.Uint32(p[at+4:]))
		v := k + int(le.Uint32(p[at+8:]))
		if string(p[k:v]) == name {
			return 3*writePageSize + v
		}
	}
	panic("no bucket " + name)
}

// TestSecretNeverQuoted: each way the reader reports a broken database
// names where and what, never a byte of the marker planted there. The
// files are also kept in testdata/secret for the commands' tests
// (cmd/entrypoint): -update rewrites them.
func TestSecretNeverQuoted(t *testing.T) {
	if _, err := ReadMembers(secretDB(goodRecords)); err != nil {
		t.Fatalf("the unbroken database: %v", err)
	}
	for _, tc := range secretBreaks() {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(tc.db, []byte(Marker)) {
				t.Fatal("the database holds no marker")
			}
			ms, err := ReadMembers(tc.db)
			if err == nil {
				t.Fatalf("no error; members %+v", ms)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
			if f := quotesMarker(err.Error()); f != "" {
				t.Errorf("error %q quotes the marker as %q", err, f)
			}
			hosttest.Golden(t, filepath.Join("testdata", "secret", tc.name+".db"), tc.db)
		})
	}
}
