package etcdpeers

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzReadMembers: any file is read without a panic, in time linear in
// its size (each page at most once); what it reads, MembersDB writes
// and the reader reads back the same.
func FuzzReadMembers(f *testing.F) {
	for _, name := range []string{"one-member", "three-members", "learner", "ipv6"} {
		f.Add(fixture(f, name))
	}
	f.Add(MembersDB(three))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ReadMembers(data)
		if err != nil {
			return
		}
		if len(ms) > MaxMembers {
			t.Fatalf("%d members, more than %d", len(ms), MaxMembers)
		}
		again, err := ReadMembers(MembersDB(ms))
		if err != nil {
			t.Fatalf("MembersDB of what was read: %v", err)
		}
		if len(ms) == 0 {
			ms = nil
		}
		if !cmp.Equal(ms, again) {
			t.Fatalf("round trip:\n%s", cmp.Diff(ms, again))
		}
	})
}

// FuzzPageWalkerSecret: whatever the file, and wherever in it the marker
// stands (planted at two offsets the fuzzer picks, over the bytes it
// mutates), no error of the reader shows the marker in any form
// (quotesMarker): errors name pages, offsets and damage, never content.
func FuzzPageWalkerSecret(f *testing.F) {
	for _, tc := range secretBreaks() {
		f.Add(tc.db, uint32(membersLeaf+pageHeaderSize), uint32(membersBranch+pageHeaderSize+8))
	}
	f.Add(secretDB(goodRecords), uint32(membersLeaf), uint32(membersLeaf+12))
	f.Add(fixture(f, "three-members"), uint32(0), uint32(4096))
	f.Fuzz(func(t *testing.T, data []byte, at1, at2 uint32) {
		if len(data) >= len(Marker) {
			data = bytes.Clone(data)
			for _, at := range []uint32{at1, at2} {
				copy(data[int(at)%(len(data)-len(Marker)+1):], Marker)
			}
		}
		if _, err := ReadMembers(data); err != nil {
			if form := quotesMarker(err.Error()); form != "" {
				t.Fatalf("error %q shows the marker as %q", err, form)
			}
		}
	})
}
