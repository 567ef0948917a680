package dnsforward

// This file holds the client side check uses: one query, and whether it
// was answered.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// NewQuery is a query with the given ID for name's AAAA records, recursion
// desired. Labels over 63 bytes, or a name over 255, are an error.
func NewQuery(id uint16, name string) ([]byte, error) {
	name = strings.TrimSuffix(name, ".")
	if len(name) > 253 {
		return nil, fmt.Errorf("name of %d bytes: over DNS's 253", len(name))
	}
	q := binary.BigEndian.AppendUint16(nil, id)
	q = append(q, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0) // RD; one question
	if name != "" {
		for label := range strings.SplitSeq(name, ".") {
			if len(label) == 0 || len(label) > 63 {
				return nil, fmt.Errorf("name %q: a label of %d bytes", name, len(label))
			}
			q = append(q, byte(len(label)))
			q = append(q, label...)
		}
	}
	return append(q, 0, 0, 28, 0, 1), nil // root; AAAA; IN
}

// Probe asks server over UDP for name's AAAA records and returns how long
// the answer took. Any reply to the query counts, whatever its RCODE: it
// is the path that is probed, not the name.
func Probe(ctx context.Context, server netip.AddrPort, name string) (time.Duration, error) {
	var idb [2]byte
	rand.Read(idb[:])
	id := binary.BigEndian.Uint16(idb[:])
	q, err := NewQuery(id, name)
	if err != nil {
		return 0, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", server.String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if deadline, ok := ctx.Deadline(); ok {
		c.SetDeadline(deadline)
	}
	start := time.Now()
	if _, err := c.Write(q); err != nil {
		return 0, err
	}
	buf := make([]byte, MaxMessage)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return 0, err
		}
		if IsReplyTo(buf[:n], id) {
			return time.Since(start), nil
		}
	}
}
