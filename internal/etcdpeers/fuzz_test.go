package etcdpeers

import (
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
