package dnsforward

// This file holds what the forwarder reads of a DNS message: the header
// checks and the TCP length framing (RFC 1035 4.2.2, RFC 7766 8).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// HeaderLen is the size of a DNS header; no message is shorter.
const HeaderLen = 12

// MaxMessage is the largest DNS message: TCP's 2-byte length cannot say
// more, and a UDP datagram cannot carry more (65535 less the UDP header
// is the IPv6 limit without jumbograms; 65507 IPv4's).
const MaxMessage = 65535

// Errors of ReadFrame and CheckQuery.
var (
	ErrShort    = errors.New("shorter than a DNS header")
	ErrNotQuery = errors.New("not a standard query with one question")
)

// CheckQuery tells whether msg may be forwarded as a query: at least a
// header, the QR bit clear (a reply sent to the forwarder is dropped, so
// that no two forwarders can bounce replies between them), opcode QUERY
// and one question (RFC 9619: every resolver sends exactly one). The
// header is all it reads: garbage rarely passes all three, and what does
// costs the upstream one FORMERR.
func CheckQuery(msg []byte) error {
	if len(msg) < HeaderLen {
		return ErrShort
	}
	if msg[2]&0xf8 != 0 || msg[4] != 0 || msg[5] != 1 {
		return ErrNotQuery
	}
	return nil
}

// queryHead is the most of a query Answers reads: its header and a
// question with the longest name.
const queryHead = HeaderLen + 255 + 4

// ID is a message's ID; msg holds at least a header.
func ID(msg []byte) uint16 { return binary.BigEndian.Uint16(msg) }

// IsReplyTo tells whether reply answers a query with the given ID: a
// header, the QR bit set and the same ID.
func IsReplyTo(reply []byte, id uint16) bool {
	return len(reply) >= HeaderLen && reply[2]&0x80 != 0 && ID(reply) == id
}

// Answers tells whether reply answers query (which holds a valid query's
// header): IsReplyTo its ID, and the same question (name, compared
// without regard to ASCII case as RFC 4343 says, type and class) when the
// reply has one: RFC 7766 7 asks a client to match both, and a late copy
// of an earlier answer with the same ID is told apart by its question.
// A reply without a question (a FORMERR, say) matches by ID alone.
func Answers(reply, query []byte) bool {
	if !IsReplyTo(reply, ID(query)) {
		return false
	}
	if reply[4] == 0 && reply[5] == 0 {
		return true
	}
	q, r := question(query), question(reply)
	if q == nil || len(q) != len(r) {
		return false
	}
	name := len(q) - 4 // type and class follow
	for i := range name {
		if lower(q[i]) != lower(r[i]) {
			return false
		}
	}
	return string(q[name:]) == string(r[name:])
}

// question is the first question of msg, name, type and class, or nil
// when msg holds none whole. A question's name is never compressed: it
// is the first name of the message, with nothing before it to point to.
func question(msg []byte) []byte {
	i := HeaderLen
	for i < len(msg) && i-HeaderLen < 255 {
		n := int(msg[i])
		if n == 0 {
			if end := i + 5; end <= len(msg) {
				return msg[HeaderLen:end]
			}
			return nil
		}
		if n > 63 {
			return nil
		}
		i += 1 + n
	}
	return nil
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

// ReadFrame reads one length-prefixed message from r into buf, which is
// grown to the message's length (at most MaxMessage, which the prefix
// cannot exceed), and returns the message. A message shorter than a
// header is ErrShort after it has been read whole, so that the stream
// stays in step; a stream that ends inside a frame is
// io.ErrUnexpectedEOF, one that ends between frames io.EOF.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	n, err := ReadLength(r)
	if err != nil {
		return nil, err
	}
	return ReadMessage(r, n, buf)
}

// ReadLength reads a frame's 2-byte length prefix: io.EOF when the stream
// ends before it, io.ErrUnexpectedEOF inside it.
func ReadLength(r io.Reader) (int, error) {
	var prefix [2]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return 0, err
	}
	return int(binary.BigEndian.Uint16(prefix[:])), nil
}

// ReadMessage reads the n bytes of a frame's message into buf, grown when
// it is too small; see ReadFrame.
func ReadMessage(r io.Reader, n int, buf []byte) ([]byte, error) {
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	msg := buf[:n]
	if _, err := io.ReadFull(r, msg); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if n < HeaderLen {
		return msg, ErrShort
	}
	return msg, nil
}

// writeFrame writes msg, at most MaxMessage bytes, with its length prefix
// in one write (writev on a TCP connection).
func writeFrame(w io.Writer, msg []byte) error {
	prefix := [2]byte{byte(len(msg) >> 8), byte(len(msg))}
	bufs := net.Buffers{prefix[:], msg}
	_, err := bufs.WriteTo(w)
	return err
}

// AppendFrame appends msg with its length prefix to dst.
func AppendFrame(dst, msg []byte) ([]byte, error) {
	if len(msg) > MaxMessage {
		return dst, fmt.Errorf("message of %d bytes: over the %d of a TCP frame", len(msg), MaxMessage)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(msg)))
	return append(dst, msg...), nil
}
