package etcdpeers

import "runtime"

// bytesPerRun is testing.AllocsPerRun in bytes: what one call of f
// allocates, on average over runs calls after a warm-up one. Memory
// bounds are tested with it, never with a clock. Not
// testing.Benchmark(...).AllocedBytesPerOp(), as other packages do: that
// runs each input for a second, and these inputs take milliseconds. Tried
// 2026-12-04 with the machine loaded: TestMembersMemory and
// TestProbeJumpsMemory took 22.7 s that way, 1.5 s with 5 runs.
func bytesPerRun(runs int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}
