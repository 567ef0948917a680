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

// manyTables is a kind config and then n tables [tN], each with a key.
func manyTables(n int) []byte {
	var b strings.Builder
	b.WriteString("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n")
	for i := range n {
		fmt.Fprintf(&b, "[t%d]\nk=1\n", i)
	}
	return []byte(b.String())
}

// deepTable is a kind config and then one header of depth parts with n
// keys.
func deepTable(depth, n int) []byte {
	var b strings.Builder
	b.WriteString("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n")
	b.WriteString("[" + strings.Repeat("a.", depth-1) + "a]\n")
	for i := range n {
		fmt.Fprintf(&b, "k%d=1\n", i)
	}
	return []byte(b.String())
}

// TestKeyPartsRefused: a config of more than maxKeyParts key parts (here
// tables of two parts each, as 32k headers `[tN]` in 256 KiB, which
// go-toml took 4 s to decode) is an error naming the line of the first
// part past the limit, found in one pass. At the limit it is decoded, and
// edited.
func TestKeyPartsRefused(t *testing.T) {
	// the kind config's header and key have 5 parts; each table 2
	n := (maxKeyParts-5)/2 + 1
	b := manyTables(n)
	if len(b) > maxConfigSize {
		t.Fatalf("fixture of %d bytes, over the cap", len(b))
	}
	// part 8193 is table n's key, on line 3 + 2n + 1 - 1
	want := fmt.Sprintf("line %d, column 1: more than %d key parts in the config", 3+2*n, maxKeyParts)
	if _, err := decode(b); err == nil || err.Error() != want {
		t.Errorf("decode: %v, want %s", err, want)
	}
	if n := testing.AllocsPerRun(1, func() { decode(b) }); n > 100_000 {
		t.Errorf("%v allocations to refuse it", n)
	}
	at := manyTables((maxKeyParts - 5) / 2)
	if _, err := decode(at); err != nil {
		t.Errorf("a config at the limit: %v", err)
	}
	if _, err := Edit(at, Change{Snapshotter: "native"}); err != nil {
		t.Errorf("edit a config at the limit: %v", err)
	}
	inline := []byte("version = 2\nx = {" + keysInline(maxTableKeys) + "}\ny = {" + keysInline(maxTableKeys) + "}\n" +
		"z = {" + keysInline(maxTableKeys) + "}\nw = {" + keysInline(maxTableKeys) + "}\n")
	if _, err := decode(inline); err == nil || !strings.Contains(err.Error(), "key parts in the config") {
		t.Errorf("inline tables over the limit: %v", err)
	}
}

// TestDeepHeaderScanLinear: the scan keeps a header's path once, not once
// for each of its keys. A header of 4000 parts with 2000 keys allocates
// to scan at most 64 bytes more for each byte of the config than one of a
// single part does (the parser's nodes and the parts' strings: 24 here);
// it copied the header for each key before: 660 MB.
func TestDeepHeaderScanLinear(t *testing.T) {
	scanBytes := func(doc []byte) int64 {
		doc = doc[:len(doc):len(doc)]
		return testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				if _, err := scanDocument(doc); err != nil {
					b.Fatal(err)
				}
			}
		}).AllocedBytesPerOp()
	}
	deep := deepTable(4000, 2000)
	if _, err := decode(deep); err != nil {
		t.Fatalf("decode: %v", err)
	}
	shallow, got := scanBytes(deepTable(1, 2000)), scanBytes(deep)
	if got > shallow+64*int64(len(deep)) {
		t.Errorf("scan of a 4000-part header with 2000 keys allocated %d bytes, of a 1-part one %d; want at most %d more", got, shallow, 64*len(deep))
	}
}

// BenchmarkDecodeKeyParts decodes the costliest shapes of configs at
// maxKeyParts: many tables, and one deep header with keys (go-toml looks
// up each part among what was defined before it).
func BenchmarkDecodeKeyParts(b *testing.B) {
	for name, doc := range map[string][]byte{
		"tables": manyTables((maxKeyParts - 5) / 2),
		"deep":   deepTable(maxKeyParts-5-maxTableKeys, maxTableKeys),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := decode(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
