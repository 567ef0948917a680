package containerd

import (
	"bytes"
	"fmt"
	"regexp"
	"testing"

	"github.com/pelletier/go-toml/v2"
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
		checkEdit(t, in, ch)
		if !res.Changed {
			return
		}
		var doc map[string]any
		if err := toml.Unmarshal(res.Config, &doc); err != nil {
			t.Fatalf("edited config does not decode: %v", err)
		}
		sch, _ := schemaFor(int64(v))
		if ch.Snapshotter != "" {
			if got := get(doc, sch.snapshotter); got != ch.Snapshotter {
				t.Fatalf("schema %d: %s = %v, want %q", v, formatKeyPath(sch.snapshotter), got, ch.Snapshotter)
			}
		}
		if ch.RestrictOOMScoreAdj {
			if got := get(doc, sch.restrictOOM); got != true {
				t.Fatalf("schema %d: %s = %v, want true", v, formatKeyPath(sch.restrictOOM), got)
			}
		}
		if bytes.Equal(res.Config, in) {
			t.Fatal("Changed, but the same bytes")
		}
	})
}

// get reads path from a decoded document, nil where it is missing.
func get(doc map[string]any, path []string) any {
	var v any = doc
	for _, k := range path {
		tbl, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = tbl[k]
	}
	return v
}
