package containerd

import (
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// FuzzEdit checks, for arbitrary bytes and change, that Edit never panics,
// refuses bad snapshotter names, accepts only strict TOML, and that
// whatever it accepts satisfies checkEdit: untouched bytes outside the
// edited values, a result that reads back as asked, and idempotence.
func FuzzEdit(f *testing.F) {
	for _, tc := range goldenCases() {
		f.Add(readTestdata(f, tc.fixture), tc.ch.Snapshotter, tc.ch.RestrictOOMScoreAdj)
	}
	for _, tc := range editCases() {
		f.Add(tc.input(), tc.ch.Snapshotter, tc.ch.RestrictOOMScoreAdj)
	}
	for _, in := range propertyInputs(f) {
		f.Add(in, "fuse-overlayfs", true)
	}
	f.Add([]byte("version = 2\n[plugins]\n\"io.containerd.grpc.v1.cri\" = { containerd = { snapshotter = 'x' } }\n"), "native", false)
	f.Add([]byte("version = 3\n[[plugins.'io.containerd.cri.v1.images'.x]]\n"), "native", true)
	f.Add([]byte("version = 2\nx = nan\n"), "zfs", true)
	f.Add([]byte("version = 2"), "", false)
	f.Add([]byte(""), "Bad Name", true)

	f.Fuzz(func(t *testing.T, in []byte, snapshotter string, restrict bool) {
		ch := Change{Snapshotter: snapshotter, RestrictOOMScoreAdj: restrict}
		res, err := Edit(in, ch)
		if snapshotter != "" && !validSnapshotterName(snapshotter) {
			if err == nil {
				t.Fatalf("Edit accepted snapshotter name %q", snapshotter)
			}
			return
		}
		if err != nil {
			return
		}
		var doc map[string]any
		if err := toml.Unmarshal(in, &doc); err != nil {
			t.Fatalf("Edit accepted input that does not decode: %v", err)
		}
		if res.Version < 2 || res.Version > 4 {
			t.Fatalf("Version = %d", res.Version)
		}
		checkEdit(t, in, ch)
	})
}
