package dnsforward

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadFrame(t *testing.T) {
	header := bytes.Repeat([]byte{0xab}, HeaderLen)
	frame := func(msg []byte) []byte { b, _ := AppendFrame(nil, msg); return b }
	for _, tc := range []struct {
		name string
		in   []byte
		// want are the messages read, then the error that ends the
		// stream.
		want    [][]byte
		wantErr error
	}{
		{"empty stream", nil, nil, io.EOF},
		{"one message", frame(header), [][]byte{header}, io.EOF},
		{"two messages", append(frame(header), frame(append(header, 1, 2))...), [][]byte{header, append(header, 1, 2)}, io.EOF},
		{"one byte of the prefix", []byte{0}, nil, io.ErrUnexpectedEOF},
		{"prefix only", []byte{0, 12}, nil, io.ErrUnexpectedEOF},
		{"cut inside the message", frame(header)[:8], nil, io.ErrUnexpectedEOF},
		{"zero length", []byte{0, 0}, nil, ErrShort},
		{"shorter than a header", frame(header[:11]), nil, ErrShort},
		{"largest prefix, cut", append([]byte{0xff, 0xff}, header...), nil, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bytes.NewReader(tc.in)
			var got [][]byte
			var err error
			for {
				var msg []byte
				if msg, err = ReadFrame(r, nil); err != nil {
					break
				}
				got = append(got, msg)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestReadFrameReusesBuffer(t *testing.T) {
	buf := make([]byte, MaxMessage)
	in, _ := AppendFrame(nil, make([]byte, 100))
	msg, err := ReadFrame(bytes.NewReader(in), buf)
	if err != nil {
		t.Fatal(err)
	}
	if &msg[0] != &buf[0] {
		t.Error("ReadFrame allocated although the buffer had room")
	}
}

func TestAppendFrameRefusesOversize(t *testing.T) {
	if _, err := AppendFrame(nil, make([]byte, MaxMessage+1)); err == nil {
		t.Error("a message over MaxMessage was framed")
	}
	if b, err := AppendFrame(nil, make([]byte, MaxMessage)); err != nil || len(b) != MaxMessage+2 || b[0] != 0xff || b[1] != 0xff {
		t.Errorf("the largest message: %d bytes, %v", len(b), err)
	}
}

func TestCheckQuery(t *testing.T) {
	q := []byte{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	if err := CheckQuery(q); err != nil {
		t.Errorf("a bare header with one question: %v", err)
	}
	for _, bad := range [][]byte{
		make([]byte, HeaderLen),                 // no question
		{0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0},    // two
		{0, 0, 0x29, 0, 0, 1, 0, 0, 0, 0, 0, 0}, // opcode UPDATE
		{0, 0, 0x01, 0, 1, 1, 0, 0, 0, 0, 0, 0}, // 257 questions
	} {
		if err := CheckQuery(bad); !errors.Is(err, ErrNotQuery) {
			t.Errorf("%x: %v", bad, err)
		}
	}
	if err := CheckQuery(q[:11]); !errors.Is(err, ErrShort) {
		t.Errorf("11 bytes: %v", err)
	}
	r := append([]byte(nil), q...)
	r[2] = 0x80
	if err := CheckQuery(r); !errors.Is(err, ErrNotQuery) {
		t.Errorf("a reply: %v", err)
	}
	r[0], r[1] = 0x12, 0x34
	if !IsReplyTo(r, 0x1234) || IsReplyTo(r, 0x1235) || IsReplyTo(q, 0) || IsReplyTo(r[:11], 0x1234) {
		t.Error("IsReplyTo: wrong answer")
	}
}

// FuzzReadFrame reads a stream of frames: every message read is exactly
// as long as its prefix says, framed again it is the bytes it came from,
// and the reader never takes more than the stream holds.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{0xff, 0xff, 0})
	f.Add([]byte{0, 0, 0, 1, 0})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		var out []byte
		buf := make([]byte, 0, 64)
		for {
			msg, err := ReadFrame(r, buf)
			if err != nil && !errors.Is(err, ErrShort) {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("error %v from a byte reader", err)
				}
				if errors.Is(err, io.EOF) && !bytes.Equal(out, in) {
					t.Fatalf("clean end after %d of %d bytes", len(out), len(in))
				}
				break
			}
			if errors.Is(err, ErrShort) != (len(msg) < HeaderLen) {
				t.Fatalf("message of %d bytes, error %v", len(msg), err)
			}
			if out, err = AppendFrame(out, msg); err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(in, out) {
				t.Fatalf("frames read do not frame back to the input's start")
			}
		}
		if int(r.Size())-r.Len() > len(in) {
			t.Fatal("read past the input")
		}
	})
}

func TestAnswers(t *testing.T) {
	q, _ := NewQuery(7, "Kind-Control-Plane")
	reply := func(id uint16, name string, edit func([]byte)) []byte {
		r, _ := NewQuery(id, name)
		r[2] |= 0x80
		if edit != nil {
			edit(r)
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		reply []byte
		want  bool
	}{
		{"same question", reply(7, "Kind-Control-Plane", nil), true},
		{"name in another case", reply(7, "kind-control-plane", nil), true},
		{"another ID", reply(8, "Kind-Control-Plane", nil), false},
		{"QR clear", reply(7, "Kind-Control-Plane", func(r []byte) { r[2] = 1 }), false},
		{"another name", reply(7, "kind-worker", nil), false},
		{"another type", reply(7, "Kind-Control-Plane", func(r []byte) { r[len(r)-3] = 1 }), false},
		{"no question (FORMERR)", []byte{0, 7, 0x80, 1, 0, 0, 0, 0, 0, 0, 0, 0}, true},
		{"question cut short", reply(7, "Kind-Control-Plane", nil)[:20], false},
		{"a compressed name", append([]byte{0, 7, 0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0}, 0xc0, 12, 0, 28, 0, 1), false},
		{"header only", []byte{0, 7, 0x80}, false},
	} {
		if got := Answers(tc.reply, q); got != tc.want {
			t.Errorf("%s: Answers(%x) = %v, want %v", tc.name, tc.reply, got, tc.want)
		}
	}
}
