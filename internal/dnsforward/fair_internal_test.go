package dnsforward

import (
	"net/netip"
	"testing"
	"time"
)

func TestSlotsShare(t *testing.T) {
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::3")
	var s slots
	s.init(16)
	takes := func(who netip.Addr, n int) {
		t.Helper()
		for i := range n {
			if !s.tryTake(who) {
				t.Fatalf("%s: slot %d of %d refused (used %d, held %v)", who, i+1, n, s.used, s.by)
			}
		}
	}
	refused := func(who netip.Addr) {
		t.Helper()
		if s.tryTake(who) {
			t.Fatalf("%s: a slot past its share or the cap (used %d, held %v)", who, s.used, s.by)
		}
	}
	takes(a, 12) // alone: three quarters of 16
	refused(a)
	takes(b, 4) // the quarter left
	refused(b)  // all 16 in flight
	s.give(a)
	refused(a) // 11, over its share of 6 now that b holds slots
	takes(b, 1)
	for range 6 {
		s.give(a)
	}
	// a holds 5, b 5: c's share is 12/3 = 4.
	takes(c, 4)
	refused(c)

	if s.used != 14 || len(s.by) != 3 {
		t.Errorf("used %d, held %v; want 14 by 3 addresses", s.used, s.by)
	}
}

// TestSlotsTake: take waits for a slot given back, and not once
// cancelled.
func TestSlotsTake(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	var s slots
	s.init(1)
	if !s.tryTake(a) {
		t.Fatal("the one slot refused")
	}
	got := make(chan bool)
	go func() { got <- s.take(b, 5*time.Second, nil) }()
	time.Sleep(20 * time.Millisecond)
	s.give(a)
	if !<-got {
		t.Error("take did not get the slot given back")
	}
	cancel := make(chan struct{})
	close(cancel)
	start := time.Now()
	if s.take(a, 5*time.Second, cancel) || time.Since(start) > time.Second {
		t.Error("take waited, or took a slot, once cancelled")
	}
	s.give(b)
	if s.used != 0 || len(s.by) != 0 {
		t.Errorf("used %d, held %v after every slot was given back", s.used, s.by)
	}
}
