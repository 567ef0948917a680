package etcdpeers

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ReadMembers is ReadMembersAt of a file's bytes.
func ReadMembers(db []byte) ([]Member, error) {
	return ReadMembersAt(bytes.NewReader(db), int64(len(db)))
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".db"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func cp(id uint64, name, url string) Member {
	return Member{ID: id, Name: name, PeerURLs: []string{url}}
}

var three = []Member{
	cp(0x2d1b3f2a0c0e4a11, "kind-control-plane", "https://172.18.0.3:2380"),
	cp(0x5a8e0b1f3c2d4e22, "kind-control-plane2", "https://172.18.0.5:2380"),
	cp(0x7c3d2e1f0a9b8c33, "kind-control-plane3", "https://172.18.0.4:2380"),
}

// TestReadMembers reads files bbolt wrote (testdata/README.md).
func TestReadMembers(t *testing.T) {
	learner := append([]Member{{ID: 0x9d4e3f2a1b0c0d44, PeerURLs: []string{"https://172.18.0.7:2380"}}}, three...)
	learner[3].Learner = true
	for _, tc := range []struct {
		file string
		want []Member
	}{
		{"one-member", []Member{cp(0x8e9e05c52164694d, "kind-control-plane", "https://172.18.0.3:2380")}},
		{"three-members", three}, // the removed fourth left out
		{"learner", learner},
		{"ipv6", []Member{
			cp(0x2d1b3f2a0c0e4a11, "kind-control-plane", "https://[fc00:f853:ccd:e793::3]:2380"),
			cp(0x5a8e0b1f3c2d4e22, "kind-control-plane2", "https://[fc00:f853:ccd:e793::5]:2380"),
			cp(0x7c3d2e1f0a9b8c33, "kind-control-plane3", "https://[fc00:f853:ccd:e793::4]:2380"),
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ReadMembers(fixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// What capture archives reads back the same.
			again, err := ReadMembers(MembersDB(got))
			if err != nil || !cmp.Equal(got, again) {
				t.Errorf("MembersDB round trip: %v\n%s", err, cmp.Diff(got, again))
			}
		})
	}
}

// TestManyMembers: a members bucket of its own pages, under a branch
// page, at the cap of members.
func TestManyMembers(t *testing.T) {
	got, err := ReadMembers(fixture(t, "many-members"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxMembers || got[0].Name != "cp00" || got[63].Name != "cp63" {
		t.Fatalf("got %d members, first %+v", len(got), got[0])
	}
	if _, err := ReadMembers(MembersDB(append(got, cp(1, "one-more", "https://10.9.9.9:2380")))); err == nil {
		t.Error("65 members read, want an error")
	}
}

// TestMembersStopAtCap: the 65th member is an error as soon as the walk
// reaches it, before the rest of the bucket (an element beyond its page,
// which 64 members and the same element show to be an error) is read.
func TestMembersStopAtCap(t *testing.T) {
	file := func(members int) []byte {
		var recs []kv
		for i := range members {
			recs = append(recs, kv{key: []byte(strconv.FormatUint(uint64(i+1), 16)), value: []byte(`{"peerURLs":[]}`)})
		}
		db := membershipFile(append(recs, kv{key: []byte("ffff")}), nil)
		e := 3*writePageSize + pageHeaderSize // the members bucket's element in the root page
		page := e + int(le.Uint32(db[e+4:])+le.Uint32(db[e+8:])) + bucketHdrSz
		last := page + pageHeaderSize + members*elementSize
		le.PutUint32(db[last+12:], 1<<30) // its value's size
		return db
	}
	if _, err := ReadMembers(file(MaxMembers)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%d members and a broken element: error %v, want ErrCorrupt", MaxMembers, err)
	}
	if _, err := ReadMembers(file(MaxMembers + 1)); err == nil || err.Error() != "more than 64 members" {
		t.Fatalf("%d members and a broken element: error %v, want more than 64 members", MaxMembers+1, err)
	}
}

// TestRemovedCap: members_removed is read up to maxRemoved IDs; one more
// is an error that names the cap, rather than a set that may have lost
// the ID of a member still in "members".
func TestRemovedCap(t *testing.T) {
	members := []kv{
		{key: []byte("1"), value: []byte(`{"name":"a","peerURLs":[]}`)},
		{key: []byte("2"), value: []byte(`{"name":"b","peerURLs":[]}`)},
	}
	var removed []kv
	for i := range maxRemoved {
		removed = append(removed, kv{key: []byte(strconv.FormatUint(uint64(i+2), 16)), value: []byte("removed")})
	}
	got, err := ReadMembers(membershipFile(members, removed))
	if err != nil || len(got) != 1 || got[0].Name != "a" {
		t.Fatalf("at the cap: %+v, %v; want member a only", got, err)
	}
	removed = append(removed, kv{key: []byte("ffffff"), value: []byte("removed")})
	if _, err := ReadMembers(membershipFile(members, removed)); err == nil || !strings.Contains(err.Error(), "more than 16384 removed member IDs") {
		t.Fatalf("error %v, want one naming the cap", err)
	}
}

// TestMembersMemory: a members bucket of n elements, all of one removed
// ID (16 bytes and a key each, as many as a 128 MiB file holds 8
// million), costs the reader no more for 2n than for n beyond the pages
// it reads (the bucket's page is read whole, copied from the file):
// nothing is gathered per element.
func TestMembersMemory(t *testing.T) {
	file := func(n int) []byte {
		return membershipFile(slices.Repeat([]kv{{key: []byte("1")}}, n), []kv{{key: []byte("1"), value: []byte("removed")}})
	}
	cost := func(db []byte) uint64 {
		return bytesPerRun(5, func() {
			if ms, err := ReadMembers(db); err != nil || len(ms) != 0 {
				t.Fatalf("%v, %v", ms, err)
			}
		})
	}
	const n = 30000
	smallDB, largeDB := file(n), file(2*n)
	small, large := cost(smallDB), cost(largeDB)
	pages := uint64(len(largeDB) - len(smallDB))
	if large > small+pages+1024 {
		t.Errorf("%d elements: %d bytes allocated, %d elements: %d; want no more than the %d bytes of pages more, and 1 KiB", n, small, 2*n, large, pages)
	}
}

// TestReadMembersBad: every malformed file is an error, never a panic
// nor a partial membership.
func TestReadMembersBad(t *testing.T) {
	good := fixture(t, "three-members")
	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 0xff
		return b
	}
	bothMetas := flip(16) // magic of meta 0
	bothMetas[4096+16] ^= 0xff
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty file"},
		{"garbage", []byte("not a database at all"), "no valid meta page"},
		{"zeros", make([]byte, 32768), "no valid meta page"},
		{"both metas broken", bothMetas, "no valid meta page"},
		{"truncated", good[:3*4096], "beyond the file"},
		{"root page's flags", flip(rootOff(t, good) + 8), "not a valid bbolt file"},
		{"root page's id", flip(rootOff(t, good)), "its header names another page"},
		{"record not JSON", MembersDBRaw(t, "1", `{"peerURLs":`), "record"},
		{"key not hex", MembersDBRaw(t, "xyz", `{"peerURLs":[]}`), "not a hex member ID"},
		{"record too large", MembersDBRaw(t, "1", `{"name":"`+strings.Repeat("a", maxRecord)+`"}`), "more than"},
		{"too many URLs", MembersDBRaw(t, "1", `{"peerURLs":["a","b","c","d","e","f","g","h","i"]}`), "peer URLs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadMembers(tc.data)
			if err == nil {
				t.Fatalf("no error; members %+v", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// rootOff is where the root bucket's page of the newest meta is.
func rootOff(t *testing.T, b []byte) int {
	f, root, err := openBolt(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return int(root * f.pageSize)
}

// TestTornMeta: a torn newer meta page is passed over for the other,
// as bbolt does.
func TestTornMeta(t *testing.T) {
	b := fixture(t, "three-members")
	m0, _, _ := parseMeta(bytes.NewReader(b), uint64(len(b)), 0)
	m1, _, _ := parseMeta(bytes.NewReader(b), uint64(len(b)), 4096)
	newer := 0
	if m1.txid > m0.txid {
		newer = 4096
	}
	b[newer+16+48] ^= 1 // its txid: the checksum no longer holds
	got, err := ReadMembers(b)
	if err != nil {
		// The older meta's tree may have been reused by the newer
		// transaction; what matters is an error, not garbage.
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
		return
	}
	if len(got) > MaxMembers {
		t.Fatalf("%d members", len(got))
	}
}

// TestPageLoop: a branch page that points at itself is refused, not
// walked forever.
func TestPageLoop(t *testing.T) {
	b := MembersDB(three)
	root := b[3*writePageSize:]
	le.PutUint16(root[8:], branchPage)
	le.PutUint16(root[10:], 1)
	le.PutUint64(root[pageHeaderSize+8:], 3)
	if _, err := ReadMembers(b); err == nil || !strings.Contains(err.Error(), "reached twice") {
		t.Fatalf("error %v, want a page reached twice", err)
	}
}

// MembersDBRaw is a membership file of one raw record.
func MembersDBRaw(t testing.TB, key, record string) []byte {
	t.Helper()
	return membershipFile([]kv{{key: []byte(key), value: []byte(record)}}, nil)
}

func TestPeerAddrs(t *testing.T) {
	m := Member{PeerURLs: []string{"https://172.18.0.3:2380", "https://[fc00::3]:2380", "https://node:2380", "https://1.2.3.4"}}
	got, err := m.PeerAddrs()
	var s []string
	for _, a := range got {
		s = append(s, a.String())
	}
	if diff := cmp.Diff([]string{"172.18.0.3:2380", "[fc00::3]:2380"}, s); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err == nil {
		t.Error("no error for a host name and a missing port")
	}
}
