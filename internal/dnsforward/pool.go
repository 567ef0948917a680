package dnsforward

// This file holds the check a kept upstream connection (TCP) passes
// before it is used again.

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// clean tells whether c, an upstream connection kept from an answered
// query, has nothing queued to read: no late copy of an answer (an
// upstream may answer twice), no error, and no end of stream. One that
// has is closed rather than read: a copy queued there has the ID, and
// maybe the question, of the last query, and the next query through the
// connection may come from another client with the same ID. A copy that
// comes after the check is told apart by its question (Answers). The
// check is one non-blocking peek, a microsecond.
func clean(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	empty := false
	err = raw.Control(func(fd uintptr) {
		var b [1]byte
		var rerr error = unix.EINTR
		for rerr == unix.EINTR {
			_, _, rerr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		}
		empty = rerr == unix.EAGAIN
	})
	return err == nil && empty
}

// queryHead is the most of a query Answers reads: its header and a
// question with the longest name.
const queryHead = HeaderLen + 255 + 4
