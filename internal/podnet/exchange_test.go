package podnet

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// countingReader hands out a stream of one byte, 1 MiB long (long enough to
// tell a bounded reader from one that is not, and short enough that an
// unbounded one ends), and counts what was taken from it.
type countingReader struct {
	b    byte
	read int
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.read >= 1<<20 {
		return 0, io.ErrUnexpectedEOF
	}
	p = p[:min(len(p), 1<<20-r.read)]
	for i := range p {
		p[i] = r.b
	}
	r.read += len(p)
	return len(p), nil
}

func TestReadLine(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            bool
		eof            bool
	}{
		{name: "ping", in: "ping 0123456789abcdef\n", want: "ping 0123456789abcdef\n"},
		{name: "only the first line", in: "pong 01\npong 02\n", want: "pong 01\n"},
		{name: "longest line", in: strings.Repeat("x", maxLine-1) + "\n", want: strings.Repeat("x", maxLine-1) + "\n"},
		{name: "closed before the newline", in: "ping 01", want: "ping 01", err: true, eof: true},
		{name: "closed at once", in: "", err: true, eof: true},
		{name: "no newline within the bound", in: strings.Repeat("x", maxLine) + "\n", want: strings.Repeat("x", maxLine), err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readLine(strings.NewReader(tt.in))
			if got != tt.want || (err != nil) != tt.err || errors.Is(err, io.EOF) != tt.eof {
				t.Errorf("readLine(%q) = %q, %v; want %q, error %v (EOF %v)", tt.in, got, err, tt.want, tt.err, tt.eof)
			}
		})
	}
}

// A peer that sends no newline gets maxLine bytes read, not more: the
// reader stops at the bound however much is on offer.
func TestReadLineBounded(t *testing.T) {
	r := &countingReader{b: 'x'}
	got, err := readLine(r)
	if err == nil {
		t.Fatalf("readLine of a line with no end = %d bytes, nil error; want an error", len(got))
	}
	if r.read > maxLine || len(got) > maxLine {
		t.Errorf("readLine took %d bytes and returned %d; want at most %d", r.read, len(got), maxLine)
	}
}
