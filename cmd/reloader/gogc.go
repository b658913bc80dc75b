package main

// reloader's default garbage-collection target.

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
)

// defaultGCPercent is reloader's GOGC when the environment sets none. Go's own 100 lets the
// heap grow to twice what is live before it collects. reloader's live heap is its cache: read
// far more than it is replaced, so after the start-up list a collection finds little garbage
// and a small headroom costs little CPU. Measured with make bench-10k (10,000 ConfigMaps, 2,000
// Secrets, 5,000 Deployments), see docs/benchmarks.md, Figures at 10,000 objects: 25 keeps RSS after sync
// under 100 MiB, for about a fifth more CPU in the start-up burst and the same reload rate and
// latency. GOGC set in the environment wins.
const defaultGCPercent = 25

// applyGCPercent sets defaultGCPercent unless GOGC is set (getenv reads the environment; "off" and any
// number keep the runtime's reading of it). It returns the percent in force, -1 for off, and
// whether it came from GOGC.
func applyGCPercent(getenv func(string) string) (percent int, fromEnv bool) {
	if getenv("GOGC") != "" {
		return currentGCPercent(), true // the runtime has read it already
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent, false
}

// currentGCPercent is the GC percent in force, -1 for off.
func currentGCPercent() int {
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	v := sample[0].Value.Uint64()
	if v == math.MaxUint64 { // off: the runtime's -1, read as unsigned
		return -1
	}
	return int(v)
}
