// Package gcpolicy is reloader's default garbage-collection policy: a small headroom over the
// live heap once the caches have synced, a larger one while they fill. It is process-wide, as
// the runtime's settings are.
package gcpolicy

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// defaultGCPercent is the headroom of reloader's heap over what is live, when the
// environment sets no GOGC. Go's own 100 lets the heap grow to twice what is live before it
// collects. reloader's live heap is its cache: read far more than it is replaced, so after
// the start-up list a collection finds little garbage and a small headroom costs little CPU.
// Measured with make bench-10k (10,000 ConfigMaps, 2,000 Secrets, 5,000 Deployments), see
// docs/benchmarks.md, Figures at 10,000 objects: 25 keeps RSS after sync under 100 MiB, for
// about a fifth more CPU in the start-up burst and the same reload rate and latency.
const defaultGCPercent = 25

// minGCHeadroom is the least headroom of the default policy. A quarter of a small heap is
// about a MiB: with a few thousand objects cached, each reload's allocations (the change's
// hash, the patch and its answer, the Events) started a collection every few reloads, and
// the collector was about a third of the CPU reloader spent per rollout (the load test's U1
// and U2). With 4 MiB, which is what Go's own default allows any heap, a small cache collects
// a few times less often; from 16 MiB live (say, 2,000 sources of 10 KiB) a quarter is more
// and the policy is GOGC=25's.
const minGCHeadroom = 4 << 20

// startupGCHeadroom is the least headroom while the caches fill, until Settle. The first list
// decodes every source and replaces its content by digests: all of it garbage a moment later
// (60 MB for 6,000 sources of 10 KiB). With the steady headroom a collection started every few
// MiB decoded and the collector was a third of start-up's CPU (the load test's U3: 1.44 s at
// start-up, 0.96 s with GOGC=100). 32 MiB lets the list run a few collections, and bounds what
// start-up adds to the peak whatever the cache's size: GOGC=100 would double a large heap.
const startupGCHeadroom = 32 << 20

// maxGCPercent bounds the percent the policy sets on a heap almost empty: the runtime's
// minimum heap grows with the percent (4 MiB x percent/100).
const maxGCPercent = 400

// Policy says which garbage-collection policy is in force, for the start-up log line.
type Policy struct {
	// Percent is GOGC from the environment (-1 for off), or defaultGCPercent.
	Percent int
	// FromEnv tells that GOGC was set, and is in force as the runtime read it.
	FromEnv bool
	// MinHeadroom is the least headroom over the live heap once settled, in bytes;
	// StartupHeadroom the least until then. Both 0 when GOGC is set.
	MinHeadroom, StartupHeadroom uint64
}

// inForce is the headroom Apply started; nil when GOGC is set or before Apply.
var inForce atomic.Pointer[headroom]

// Apply starts the default policy unless GOGC is set (getenv reads the environment; "off" and
// any number keep the runtime's reading of it): each collection's heap goal is what is live
// plus max(defaultGCPercent of it, the least headroom), the percent set again after each
// collection from what it found live. The least headroom is startupGCHeadroom until Settle,
// minGCHeadroom after.
func Apply(getenv func(string) string) Policy {
	if getenv("GOGC") != "" {
		return Policy{Percent: currentGCPercent(), FromEnv: true} // the runtime has read it already
	}
	h := newHeadroom(defaultGCPercent, startupGCHeadroom)
	h.adjust()
	h.afterEachGC()
	if old := inForce.Swap(h); old != nil {
		old.stopped.Store(true)
	}
	return Policy{Percent: defaultGCPercent, MinHeadroom: minGCHeadroom, StartupHeadroom: startupGCHeadroom}
}

// Settle ends start-up, once the caches have synced: the least headroom becomes
// minGCHeadroom, and one collection gives the free heap pages back to the system at once,
// rather than at the scavenger's pace. With GOGC set, only the latter.
func Settle() {
	if h := inForce.Load(); h != nil {
		h.setMinHeadroom(minGCHeadroom)
	}
	debug.FreeOSMemory()
}

// gcPercentFor is the GC percent whose heap goal leaves at least minHeadroom bytes over
// scanned, and never less than base percent of it. scanned is what the runtime applies the
// percent to: the live heap, the goroutine stacks and the globals.
func gcPercentFor(scanned uint64, base int, minHeadroom uint64) int {
	if scanned == 0 {
		return maxGCPercent
	}
	p := (minHeadroom*100 + scanned - 1) / scanned // rounded up
	if p > maxGCPercent {
		return maxGCPercent
	}
	return max(int(p), base)
}

// changedEnough tells whether the percent in force, cur, should be set to want: only a move
// of more than a tenth, so that a heap that breathes a little does not reset the pacer at
// each collection; any move back to the base percent is made.
func changedEnough(cur, want, base int) bool {
	if cur == want {
		return false
	}
	if want == base {
		return true
	}
	d := cur - want
	if d < 0 {
		d = -d
	}
	return d*10 > cur
}

// headroom sets the GC percent after each collection (gcPercentFor).
type headroom struct {
	base int
	// mu guards what adjust reads and sets: it runs after each collection, on the finalizer's
	// goroutine, and from setMinHeadroom.
	mu          sync.Mutex
	minHeadroom uint64
	current     int
	samples     []metrics.Sample
	// stopped ends the hook of afterEachGC (tests, a second Apply).
	stopped atomic.Bool
}

func newHeadroom(base int, minHeadroom uint64) *headroom {
	return &headroom{base: base, minHeadroom: minHeadroom, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
}

// setMinHeadroom changes the least headroom, and the percent at once.
func (h *headroom) setMinHeadroom(b uint64) {
	h.mu.Lock()
	h.minHeadroom = b
	h.mu.Unlock()
	h.adjust()
}

// adjust sets the percent for what the last collection found live.
func (h *headroom) adjust() {
	h.mu.Lock()
	defer h.mu.Unlock()
	metrics.Read(h.samples)
	var scanned uint64
	for _, s := range h.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			scanned += s.Value.Uint64()
		}
	}
	if want := gcPercentFor(scanned, h.base, h.minHeadroom); h.current == 0 || changedEnough(h.current, want, h.base) {
		debug.SetGCPercent(want)
		h.current = want
	}
}

// gcCycle is an object nothing refers to: its finalizer runs once after the collection that
// finds it, and arms the next one.
type gcCycle struct{ h *headroom }

// afterEachGC calls adjust after every collection, for the life of the process.
func (h *headroom) afterEachGC() {
	runtime.SetFinalizer(&gcCycle{h: h}, func(c *gcCycle) {
		if c.h.stopped.Load() {
			return
		}
		c.h.adjust()
		c.h.afterEachGC()
	})
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
