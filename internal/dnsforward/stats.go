package dnsforward

// This file holds what the forwarder counts, and the summary lines it
// logs of it: one line per interval in which something happened, not a
// line per query.

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// Counts are the forwarder's counts since it started.
type Counts struct {
	// UDP and TCP are the queries answered over each.
	UDP, TCP int64
	// Garbage is datagrams and TCP messages that were not DNS queries
	// (or, from the upstream, not the reply awaited).
	Garbage int64
	// Busy is queries dropped with every in-flight slot taken, or
	// their client address's share of them (slots).
	Busy int64
	// Failed is queries the upstream did not answer in time, or at all
	// (LastErr is the last reason).
	Failed  int64
	LastErr string
	// Idle is TCP connections closed for sending no query in time;
	// Unread those closed for not reading an answer in time; Evicted
	// those closed to make room for a new one; Refused new ones turned
	// away with every connection busy.
	Idle, Unread, Evicted, Refused int64
	// Buffers is the MaxMessage buffers held now, PeakBuffers the most
	// held at once: at most 2 + InFlight + Conns (Limits.MemoryBound).
	Buffers, PeakBuffers int64
}

type stats struct {
	udp, tcp, garbage, busy, failed, idle, unread, evicted, refused atomic.Int64
	buffers, peakBuffers                                            atomic.Int64

	lastErr  atomic.Value // string
	mu       sync.Mutex
	reported Counts
}

func (s *stats) bufferOut() {
	n := s.buffers.Add(1)
	for {
		peak := s.peakBuffers.Load()
		if n <= peak || s.peakBuffers.CompareAndSwap(peak, n) {
			return
		}
	}
}

func (s *stats) fail(err error) {
	s.failed.Add(1)
	s.lastErr.Store(err.Error())
}

func (s *stats) load() Counts {
	last, _ := s.lastErr.Load().(string)
	return Counts{
		UDP: s.udp.Load(), TCP: s.tcp.Load(), Garbage: s.garbage.Load(), Busy: s.busy.Load(),
		Failed: s.failed.Load(), LastErr: last,
		Idle: s.idle.Load(), Unread: s.unread.Load(), Evicted: s.evicted.Load(), Refused: s.refused.Load(),
		Buffers: s.buffers.Load(), PeakBuffers: s.peakBuffers.Load(),
	}
}

// report logs what happened since the last report, if anything: at INFO
// when every query was answered, at WARN otherwise. interval 0 is the
// final report.
func (s *stats) report(log *logline.Logger, interval time.Duration) {
	now := s.load()
	s.mu.Lock()
	was := s.reported
	s.reported = now
	s.mu.Unlock()
	udp, tcp := now.UDP-was.UDP, now.TCP-was.TCP
	parts := []string{fmt.Sprintf("%d queries answered (UDP %d, TCP %d)", udp+tcp, udp, tcp)}
	lv := logline.Info
	add := func(n int64, what string, warn bool) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
			if warn {
				lv = logline.Warn
			}
		}
	}
	add(now.Failed-was.Failed, "failed (last: "+now.LastErr+")", true)
	add(now.Busy-was.Busy, "dropped with every slot, or the client's share, in flight", true)
	add(now.Refused-was.Refused, "TCP connections refused, all busy", true)
	add(now.Garbage-was.Garbage, "messages dropped, not DNS queries", false)
	add(now.Idle-was.Idle, "idle TCP connections closed", false)
	add(now.Unread-was.Unread, "TCP connections closed for not reading their answers", true)
	add(now.Evicted-was.Evicted, "TCP connections waiting on their clients closed for new ones", false)
	if udp+tcp == 0 && len(parts) == 1 {
		return
	}
	when := "in the last " + interval.String()
	if interval == 0 {
		when = "stopping; since the last report"
	}
	log.Log(lv, "dns-forwarder: "+when+": "+strings.Join(parts, ", "))
}
