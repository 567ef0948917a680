package userns

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseUIDMap: any uid_map gives an error naming a line, or an answer
// that is "full" exactly for one line mapping 0 to 0 for 4294967295 ids.
func FuzzParseUIDMap(f *testing.F) {
	for _, tt := range uidMapTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		full, err := ParseUIDMap([]byte(in))
		lines := strings.Split(in, "\n")
		if err != nil {
			if full {
				t.Fatalf("ParseUIDMap(%q) = true with error %v", in, err)
			}
			n, convErr := strconv.Atoi(strings.TrimPrefix(strings.SplitN(err.Error(), ":", 2)[0], "line "))
			if convErr != nil || n < 1 || n > len(lines) {
				t.Fatalf("ParseUIDMap(%q) error %q does not name one of its %d lines", in, err, len(lines))
			}
			return
		}
		var mappings [][]string
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 {
				if len(f) != 3 {
					t.Fatalf("ParseUIDMap(%q) accepted line %q", in, l)
				}
				mappings = append(mappings, f)
			}
		}
		want := false
		if len(mappings) == 1 {
			var v [3]uint64
			for i, s := range mappings[0] {
				v[i], _ = strconv.ParseUint(s, 10, 32)
			}
			want = v == [3]uint64{0, 0, 4294967295}
		}
		if full != want {
			t.Fatalf("ParseUIDMap(%q) = %t, want %t", in, full, want)
		}
	})
}
