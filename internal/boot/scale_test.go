package boot

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// heapWriter counts what is written and the most heap live at any write
// (after a collection: garbage does not count).
type heapWriter struct {
	n       int
	maxHeap uint64
}

func (w *heapWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	w.maxHeap = max(w.maxHeap, m.HeapAlloc)
	return len(p), nil
}

// bigPlan is one step of n mkdir actions, as a host of many cgroup mounts
// plans.
func bigPlan(n int) []Result {
	actions := make([]plan.Action, n)
	for i := range actions {
		actions[i] = plan.Mkdir(fmt.Sprintf("/sys/fs/cgroup/cpuset/c%d/kubelet.slice", i), 0o755)
	}
	return []Result{{Step: "fix_cgroup", Actions: actions}}
}

// TestRenderStreams: rendering a plan holds a buffer of it, not all of it
// (the plan of 50k cpuset mounts, hundreds of MiB of text, was
// built whole before it was written).
func TestRenderStreams(t *testing.T) {
	results := bigPlan(60_000)
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var w heapWriter
	if err := Render(&w, &Host{}, results); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(results) // in the base: what is rendered stays live
	if grown := int64(w.maxHeap) - int64(base.HeapAlloc); grown > int64(w.n/2) {
		t.Errorf("rendering %d MiB of plan had %d MiB more heap in use at a write; want under half the plan", w.n>>20, grown>>20)
	}
}

// BenchmarkRender renders a plan of 200k actions (the cgroup mounts of a
// host of 50k cpuset hierarchies plan four actions each).
func BenchmarkRender(b *testing.B) {
	results := bigPlan(200_000)
	for b.Loop() {
		var w heapWriter
		Render(&discard{&w}, &Host{}, results)
	}
}

type discard struct{ w *heapWriter }

func (d *discard) Write(p []byte) (int, error) { d.w.n += len(p); return len(p), nil }
