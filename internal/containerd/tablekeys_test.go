package containerd

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// wideTable is a kind config with a table [x] of n keys.
func wideTable(n int) []byte {
	var b strings.Builder
	b.WriteString("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n[x]\n")
	for i := range n {
		// Three base-36 digits a key: 43k keys fit the size cap.
		k := strconv.FormatInt(int64(36*36+i), 36)
		b.WriteString(k + "=1\n")
	}
	return []byte(b.String())
}

// TestWideTableRefused: a table of 43k keys (a real config seen in the wild,
// under the size cap) is an error naming the line of the first key past
// the limit, found in one pass; before, go-toml took seconds to accept it,
// comparing each key with all the others. At the limit it is decoded.
func TestWideTableRefused(t *testing.T) {
	b := wideTable(43_000)
	if len(b) > maxConfigSize {
		t.Fatalf("fixture of %d bytes, over the cap", len(b))
	}
	_, err := decode(b)
	if err == nil || err.Error() != fmt.Sprintf("line %d, column 1: more than %d keys in one table", 4+maxTableKeys+1, maxTableKeys) {
		t.Errorf("decode: %v", err)
	}
	if n := testing.AllocsPerRun(1, func() { decode(b) }); n > 100_000 {
		t.Errorf("%v allocations to refuse it", n)
	}
	if _, err := decode(wideTable(maxTableKeys)); err != nil {
		t.Errorf("a table at the limit: %v", err)
	}
	inline := []byte("version = 2\nx = {" + keysInline(maxTableKeys+1) + "}\n")
	if _, err := decode(inline); err == nil || !strings.Contains(err.Error(), "keys in one table") {
		t.Errorf("an inline table over the limit: %v", err)
	}
}

func keysInline(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d = 1", i)
	}
	return strings.Join(keys, ", ")
}

// BenchmarkDecodeWideTable decodes configs with one table of 2048 keys
// (the limit) and of 43k (refused).
func BenchmarkDecodeWideTable(b *testing.B) {
	for _, n := range []int{maxTableKeys, 43_000} {
		doc := wideTable(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				decode(doc)
			}
		})
	}
}
