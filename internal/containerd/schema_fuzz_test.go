package containerd

import (
	"bytes"
	"fmt"
	"regexp"
	"testing"
)

// versionLine is a top-level version key as config files write it.
var versionLine = regexp.MustCompile(`(?m)^version\s*=\s*\d+[ \t]*(#.*)?\r?\n`)

// FuzzEditSchemas is FuzzEdit with the schema version held apart from
// the body: a fuzzed body under `version = 2`, 3 or 4, so that mutations
// explore the tables of each schema rather than the version line. What Edit
// accepts must satisfy checkEdit (untouched bytes outside the edited
// values, a result that reads back as asked, idempotence) and be edited
// at the keys of its own schema.
func FuzzEditSchemas(f *testing.F) {
	bodies := [][]byte{
		[]byte("[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = false\n"),
		[]byte("[plugins.'io.containerd.cri.v1.images']\n  snapshotter = 'overlayfs'\n[plugins.'io.containerd.cri.v1.runtime']\n  restrict_oom_score_adj = false\n"),
		[]byte("[plugins]\n  'io.containerd.cri.v1.images' = { snapshotter = 'overlayfs' }\n"),
		[]byte("plugins.\"io.containerd.grpc.v1.cri\".containerd.snapshotter = \"x\"\n"),
		[]byte(""),
	}
	for _, name := range []string{"kind-v2.toml", "kind-v3.toml", "containerd-default-v3.toml"} {
		bodies = append(bodies, versionLine.ReplaceAll(readTestdata(f, name), nil))
	}
	for _, b := range bodies {
		for v := uint8(2); v <= 4; v++ {
			f.Add(v, b, "fuse-overlayfs", true)
			f.Add(v, b, "native", false)
		}
	}
	f.Fuzz(func(t *testing.T, version uint8, body []byte, snapshotter string, restrict bool) {
		v := 2 + int(version%3)
		in := append([]byte(fmt.Sprintf("version = %d\n", v)), body...)
		ch := Change{Snapshotter: snapshotter, RestrictOOMScoreAdj: restrict}
		res, err := Edit(in, ch)
		if err != nil {
			return
		}
		if res.Version != v {
			t.Fatalf("Version = %d for a version %d file", res.Version, v)
		}
		// checkEdit reads the values back at the keys of res.Version's
		// schema, which is v's.
		checkEdit(t, in, ch)
		if res.Changed && bytes.Equal(res.Config, in) {
			t.Fatal("Changed, but the same bytes")
		}
	})
}
