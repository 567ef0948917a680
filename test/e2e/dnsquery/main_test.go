package main

import (
	"encoding/binary"
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// answer is a stand-in DNS server's reply to query: its header and its
// one question, then one A record (a pointer to the question's name)
// holding ip; the query's additional records (Go's EDNS0) are dropped.
func answer(query []byte, ip net.IP) []byte {
	end := 12
	for end < len(query) && query[end] != 0 {
		end += int(query[end]) + 1
	}
	end += 1 + 4 // the root label, then type and class
	if end > len(query) {
		return nil
	}
	resp := slices.Clone(query[:end])
	resp[2], resp[3] = 0x81, 0x80            // a response, recursion desired and available
	binary.BigEndian.PutUint16(resp[6:], 1)  // one answer
	binary.BigEndian.PutUint16(resp[10:], 0) // no additional record
	return append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, ip[0], ip[1], ip[2], ip[3])
}

// A stand-in server on each transport, each on a port of its own (nothing
// listens on the other transport there), answers with an address of its
// own: what comes back shows which transport carried the query.
func TestLookupUsesTheTransportAsked(t *testing.T) {
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = udp.WriteTo(answer(buf[:n], net.IPv4(10, 0, 0, 1).To4()), from)
		}
	}()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			var size [2]byte
			if _, err := io.ReadFull(c, size[:]); err == nil {
				q := make([]byte, binary.BigEndian.Uint16(size[:]))
				if _, err := io.ReadFull(c, q); err == nil {
					r := answer(q, net.IPv4(10, 0, 0, 2).To4())
					_, _ = c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(r))), r...))
				}
			}
			c.Close()
		}
	}()
	for proto, c := range map[string]struct{ server, want string }{
		"udp": {udp.LocalAddr().String(), "10.0.0.1"},
		"tcp": {tcp.Addr().String(), "10.0.0.2"},
	} {
		got, err := lookup(c.server, proto, "peer", 5*time.Second)
		if err != nil || !slices.Equal(got, []string{c.want}) {
			t.Errorf("lookup over %s = %q, %v; want [%s]", proto, got, err, c.want)
		}
	}
}
