package capture

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// bigPlanText is a plan's text of n kubelet roots, without a secret.
func bigPlanText(n int) []byte {
	return bytes.Repeat([]byte("  mkdir /sys/fs/cgroup/cpuset/k/k/k/k/n1/kubelet 0755\n"), n)
}

// TestScrubCopiesNothingClean: scrubbing an extra file that holds no key,
// credential or URL userinfo returns it as it is (the plan of
// 50k cpuset mounts, 160 MB, was copied twice, to a string and back).
// With a credential in it, it is redacted all the same.
func TestScrubCopiesNothingClean(t *testing.T) {
	b := &builder{keys: [][]byte{[]byte("-----BEGIN PRIVATE KEY-----\nabc")}}
	b.addCredentials("http://user:secret@proxy:3128")
	plan := bigPlanText(20_000)
	res := testing.Benchmark(func(tb *testing.B) {
		for tb.Loop() {
			b.scrub(plan)
		}
	})
	if n := res.AllocedBytesPerOp(); n > int64(len(plan))/10 {
		t.Errorf("%d bytes allocated scrubbing %d clean bytes; want at most a tenth", n, len(plan))
	}
	dirty := append(bigPlanText(10), "HTTP_PROXY=http://user:secret@proxy:3128\n"...)
	if got := string(b.scrub(dirty)); strings.Contains(got, "secret") || !strings.Contains(got, "REDACTED@proxy") {
		t.Errorf("scrubbed:\n%s", got)
	}
}

// BenchmarkScrubPlan scrubs a 55 MB plan text without a secret (ten times
// the 100k lines of TestRedactLinesAllocs).
func BenchmarkScrubPlan(b *testing.B) {
	bl := &builder{}
	plan := bigPlanText(1_000_000)
	b.ReportAllocs()
	for b.Loop() {
		bl.scrub(plan)
	}
}

// TestStreamScrubbedAsWhole: a stream is scrubbed line by line to the
// same bytes as scrub makes of its whole text, for a text holding a key
// (raw, with its newline, and quoted), the proxy credentials, a URL's
// userinfo, and a last line without a newline; and the archive of a host
// whose plan quotes its keys and credentials holds the same plan either way.
func TestStreamScrubbedAsWhole(t *testing.T) {
	b := &builder{keys: [][]byte{[]byte("t0ken\n"), []byte("-----BEGIN PRIVATE KEY-----\nabc\n")}}
	b.addCredentials("http://user:secret@proxy:3128")
	text := "  write /a \"-----BEGIN PRIVATE KEY-----\\nabc\\n\"\nplain line\nHTTP_PROXY=http://user:secret@proxy:3128\n" +
		"value t0ken\nnext https://u:p@h/x\nclean\nlast http://a:b@c"
	whole := b.scrub([]byte(text))
	// Written in pieces that split lines, as a buffered renderer does.
	render := func(w io.Writer) error {
		for i := 0; i < len(text); i += 7 {
			if _, err := io.WriteString(w, text[i:min(i+7, len(text))]); err != nil {
				return err
			}
		}
		return nil
	}
	var streamed bytes.Buffer
	if err := b.scrubbed(&streamed, render); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(whole), streamed.String()); diff != "" {
		t.Errorf("streamed scrub differs from the whole text's (-whole +streamed):\n%s", diff)
	}
	for _, s := range []string{"secret", "t0ken", "abc", ":p@", "a:b@"} {
		if strings.Contains(streamed.String(), s) {
			t.Errorf("the streamed text holds %q:\n%s", s, streamed.String())
		}
	}

	// The plan quotes resolv.conf (short), here with a URL's password in
	// a comment: what scrub removes now that no plan quotes a key.
	src := copyHost(t, "net-ip-change")
	hosttest.AddFiles(t, src, map[string]string{"etc/resolv.conf": "# via http://user:pa55@proxy:3128\nnameserver 127.0.0.11\n"})
	tree := system.NewTree(src)
	env, _ := tree.Environ()
	rec := NewRecorder(tree)
	plan, _ := Plan(boot.DryRunOn(context.Background(), rec, rec.Env(env), boot.Steps(), boot.DryRunOptions{ProbeTimeout: testProbeTimeout}))
	var text2 bytes.Buffer
	if err := plan(&text2); err != nil {
		t.Fatal(err)
	}
	archived := func(o Options) tarEntry {
		o.Time = time.Unix(1700000000, 0)
		var buf bytes.Buffer
		if _, err := Archive(&buf, rec, o); err != nil {
			t.Fatal(err)
		}
		return readArchive(t, buf.Bytes())["/"+system.ProbeDir+"/plan"]
	}
	held := archived(Options{Extra: map[string][]byte{"plan": text2.Bytes()}})
	streamedPlan := archived(Options{Streams: map[string]func(io.Writer) error{"plan": plan}})
	if diff := cmp.Diff(held.hdr, streamedPlan.hdr); diff != "" {
		t.Errorf(".host/plan's header (-held +streamed):\n%s", diff)
	}
	if bytes.Equal(held.data, text2.Bytes()) {
		t.Fatal("the host's plan holds nothing to scrub: the test needs one that does")
	}
	if !bytes.Equal(held.data, streamedPlan.data) || len(held.data) == 0 {
		t.Errorf(".host/plan streamed differs from it held (%d and %d bytes)", len(held.data), len(streamedPlan.data))
	}
}

// TestStreamRenderedTwiceAlike: a stream that writes more or less the
// second time than the first is an error, never a member whose size its
// header misstates.
func TestStreamRenderedTwiceAlike(t *testing.T) {
	for _, second := range []string{"longer text\n", "short\n"} {
		n := 0
		render := func(w io.Writer) error {
			n++
			text := "first text\n"
			if n > 1 {
				text = second
			}
			_, err := io.WriteString(w, text)
			return err
		}
		rec := NewRecorder(system.NewTree(t.TempDir()))
		_, err := Archive(io.Discard, rec, Options{Streams: map[string]func(io.Writer) error{"plan": render}})
		if err == nil || !strings.Contains(err.Error(), "archive /.host/plan: ") {
			t.Errorf("a stream of 11 bytes, then %d: %v, want an error naming it", len(second), err)
		}
	}
}
