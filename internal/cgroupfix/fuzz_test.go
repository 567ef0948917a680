package cgroupfix

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzSelfCgroupCPU: any /proc/self/cgroup gives a clear error or an
// absolute one-line path taken from a line that names the cpu controller.
func FuzzSelfCgroupCPU(f *testing.F) {
	for _, tt := range cpuCgroupTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := ParseSelfCgroup([]byte(in)).CPU()
		if err != nil {
			if p != "" {
				t.Fatalf("CPU(%q) = %q with error %v", in, p, err)
			}
			return
		}
		// One CR of a CRLF ending is dropped; a cgroup name may end in
		// another (the kernel allows any byte but '/' and NUL in it).
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\n") {
			t.Fatalf("CPU(%q) = %q: want an absolute path on one line", in, p)
		}
		for _, line := range strings.Split(in, "\n") {
			_, rest, _ := strings.Cut(line, ":")
			controllers, path, ok := strings.Cut(rest, ":")
			if !ok || strings.TrimSuffix(path, "\r") != p {
				continue
			}
			for _, c := range strings.Split(controllers, ",") {
				if c == "cpu" {
					return
				}
			}
		}
		t.Fatalf("CPU(%q) = %q: no line names cpu with that path", in, p)
	})
}

// FuzzFilterProcCgroups: exactly the lines whose first field is misc go,
// every other byte stays, and filtering twice changes nothing more.
func FuzzFilterProcCgroups(f *testing.F) {
	for _, tt := range filterTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := FilterProcCgroups([]byte(in))
		var want bytes.Buffer
		for _, l := range strings.SplitAfter(in, "\n") {
			if fields := strings.Fields(l); len(fields) > 0 && fields[0] == "misc" {
				continue
			}
			want.WriteString(l)
		}
		if !bytes.Equal(out, want.Bytes()) {
			t.Fatalf("FilterProcCgroups(%q) = %q, want %q", in, out, want.Bytes())
		}
		if again := FilterProcCgroups(out); !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q then %q", out, again)
		}
	})
}
