package capture

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/proxy"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// manyCredentials is a drop-in assigning n values "uI@", each a
// credential: the shape of the 130k a drop-in of 1 MiB can hold.
func manyCredentials(n int) string {
	var s strings.Builder
	s.WriteString("[Manager]\nDefaultEnvironment=")
	for i := range n {
		fmt.Fprintf(&s, " a=u%d@", i)
	}
	return s.String() + "\n"
}

// archiveDropIn archives a host whose proxy drop-in, read, is dropIn.
func archiveDropIn(t *testing.T, dropIn string) (map[string]tarEntry, error) {
	t.Helper()
	tree := system.NewTree(hosttest.Dir(t, map[string]string{
		"proc/self/mountinfo": "1 0 0:1 / / rw - ext4 /dev/sda rw\n",
		proxy.DropIn[1:]:      dropIn,
	}))
	rec := NewRecorder(tree)
	if _, err := rec.ReadFile(proxy.DropIn, system.LimitConfig); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Archive(&buf, rec, Options{Time: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	return readArchive(t, buf.Bytes()), nil
}

// TestProxyCredentialsCapped: a drop-in of maxCredentials credentials is
// archived with each redacted; one more fails the archive, naming the
// drop-in, rather than archive one in clear. (Every credential was kept,
// each searched for and re-sorted on every value added: 130k of them in
// a drop-in of 1 MiB, then searched for on every line archived.)
func TestProxyCredentialsCapped(t *testing.T) {
	entries, err := archiveDropIn(t, manyCredentials(maxCredentials))
	if err != nil {
		t.Fatalf("a drop-in of %d credentials: %v", maxCredentials, err)
	}
	got := string(entries[proxy.DropIn].data)
	if want := strings.Repeat(" a=REDACTED@", maxCredentials); !strings.Contains(got, want) {
		t.Errorf("the drop-in of %d credentials, archived:\n%s", maxCredentials, got)
	}

	_, err = archiveDropIn(t, manyCredentials(maxCredentials+1))
	if err == nil || !strings.Contains(err.Error(), proxy.DropIn+": more than 64 proxy credentials") {
		t.Errorf("a drop-in of %d credentials: %v, want an error naming it", maxCredentials+1, err)
	}
}

// TestRedactCopiesOnce: redacting a text that holds every credential
// recorded copies it once, not once for each credential found.
func TestRedactCopiesOnce(t *testing.T) {
	b := &builder{}
	var text, want strings.Builder
	for i := range maxCredentials {
		b.addCredentials(fmt.Sprintf("http://user%d:secret@proxy:3128", i))
		fmt.Fprintf(&text, "  HTTP_PROXY=user%d:secret@proxy:3128 %s\n", i, strings.Repeat("x", 100))
		fmt.Fprintf(&want, "  HTTP_PROXY=REDACTED@proxy:3128 %s\n", strings.Repeat("x", 100))
	}
	s := text.String()
	if got := b.redact(s); got != want.String() {
		t.Fatalf("redacted:\n%s", got)
	}
	res := testing.Benchmark(func(tb *testing.B) {
		for tb.Loop() {
			b.redact(s)
		}
	})
	if n := res.AllocedBytesPerOp(); n > 2*int64(len(s)) {
		t.Errorf("%d bytes allocated redacting %d bytes of %d credentials; want at most twice the text", n, len(s), maxCredentials)
	}
}

// TestRedactOverlappingCredentials: credentials found overlapping are
// redacted as one, and one found inside another's redaction is not
// (ReplaceAll of each, longest first, left a piece of "zq" and redacted
// in "REDACTED@" a credential "ED").
func TestRedactOverlappingCredentials(t *testing.T) {
	for _, tt := range []struct {
		values []string
		in     string
		want   string
	}{
		{[]string{"zq@proxy", "q@secret@proxy"}, "x zq@secret@proxy", "x REDACTED@proxy"},
		{[]string{"u:p@ss@h", "u:p@h"}, "u:p@ss@h u:p@h", "REDACTED@h REDACTED@h"},
		{[]string{"a:b@h", "c:d@h"}, "a:b@c:d@h", "REDACTED@REDACTED@h"},
		{[]string{"user:pw@h", "ED@h"}, "user:pw@h", "REDACTED@h"},
	} {
		b := &builder{}
		for _, v := range tt.values {
			b.addCredentials(v)
		}
		if got := b.redact(tt.in); got != tt.want {
			t.Errorf("credentials of %q: redact(%q) = %q, want %q", tt.values, tt.in, got, tt.want)
		}
	}
}

// BenchmarkScrubCredentials scrubs a stream of 100k plan lines, one in a
// hundred holding an "@", with maxCredentials credentials recorded. A
// bytes.Contains for each of them on every line took 170 ms; a look
// at each "@", 4.4 ms (on 2 busy CPUs).
func BenchmarkScrubCredentials(b *testing.B) {
	bl := &builder{}
	for i := range maxCredentials {
		bl.addCredentials(fmt.Sprintf("http://user%d:secret@proxy:3128", i))
	}
	var text bytes.Buffer
	for i := range 100_000 {
		if i%100 == 0 {
			text.WriteString("  start getty@tty1.service\n")
		}
		text.WriteString("  mkdir /sys/fs/cgroup/cpuset/k/k/k/k/n1/kubelet 0755\n")
	}
	render := func(w io.Writer) error {
		_, err := w.Write(text.Bytes())
		return err
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := bl.scrubbed(io.Discard, render); err != nil {
			b.Fatal(err)
		}
	}
}
