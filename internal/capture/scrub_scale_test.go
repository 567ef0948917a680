package capture

import (
	"bytes"
	"strings"
	"testing"
)

// bigPlanText is a plan's text of n kubelet roots, without a secret.
func bigPlanText(n int) []byte {
	return bytes.Repeat([]byte("  mkdir /sys/fs/cgroup/cpuset/k/k/k/k/n1/kubelet 0755\n"), n)
}

// TestScrubCopiesNothingClean: scrubbing an extra file that holds no key,
// credential or URL userinfo returns it as it is (issue 24: the plan of
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
