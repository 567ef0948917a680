package dnsforward

import "testing"

// TestIDSequence: 65,536 IDs in a row are all different (an ID comes
// again only after every other), two sequences differ, and an ID held by
// a pending query is skipped.
func TestIDSequence(t *testing.T) {
	var a, b idSequence
	a.init()
	b.init()
	seen := make(map[uint16]bool, 1<<16)
	same := 0
	for range 1 << 16 {
		id := a.next(nil)
		if seen[id] {
			t.Fatalf("ID %d came twice in 65,536", id)
		}
		seen[id] = true
		if id == b.next(nil) {
			same++
		}
	}
	if same > 64 {
		t.Errorf("two sequences agree on %d of 65,536 IDs", same)
	}
	c := a
	held := c.next(nil)
	if got := a.next(map[uint16]*udpQuery{held: {}}); got == held {
		t.Errorf("next gave %d, which a pending query holds", got)
	}
}
