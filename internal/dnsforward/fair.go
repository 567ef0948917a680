package dnsforward

// This file holds the in-flight slots and their fair share among client
// addresses.

import (
	"net/netip"
	"sync"
	"time"
)

// slots are the queries in flight, at most max, each counted for its
// client's address. An address may hold at most its share: three
// quarters of max, divided among the addresses holding slots (itself
// included), and at least one. One client that floods the forwarder with
// queries the upstream never answers therefore holds at most three
// quarters; once k clients do, each takes no more than 3/(4k) (what one
// holds past that is given back as its queries end, within
// QueryTimeout), and a quarter stays free for a new one.
type slots struct {
	mu    sync.Mutex
	max   int
	used  int
	by    map[netip.Addr]int // addresses holding slots: at most max
	freed chan struct{}      // closed when a slot is given back, for waiters
}

func (s *slots) init(max int) {
	s.max, s.by = max, make(map[netip.Addr]int)
}

// tryTake takes a slot for client if one is free and within its share.
func (s *slots) tryTake(client netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeLocked(client)
}

func (s *slots) takeLocked(client netip.Addr) bool {
	held, holders := s.by[client], len(s.by)
	if held == 0 {
		holders++ // its share counts it among the holders
	}
	if s.used >= s.max || held >= max(1, (s.max-s.max/4)/holders) {
		return false
	}
	s.used++
	s.by[client] = held + 1
	return true
}

// take is tryTake that waits up to timeout for a slot, or until cancel
// is closed.
func (s *slots) take(client netip.Addr, timeout time.Duration, cancel <-chan struct{}) bool {
	var timer *time.Timer
	for {
		select {
		case <-cancel:
			return false
		default:
		}
		s.mu.Lock()
		if s.takeLocked(client) {
			s.mu.Unlock()
			return true
		}
		if s.freed == nil {
			s.freed = make(chan struct{})
		}
		freed := s.freed
		s.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(timeout)
			defer timer.Stop()
		}
		select {
		case <-freed:
		case <-timer.C:
			return false
		case <-cancel:
			return false
		}
	}
}

// give gives client's slot back, and wakes those waiting for one.
func (s *slots) give(client netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	if s.by[client]--; s.by[client] <= 0 {
		delete(s.by, client)
	}
	if s.freed != nil {
		close(s.freed)
		s.freed = nil
	}
}
