package baseline

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// The baselines keep source objects the cache no longer holds: what a source was before a
// change. Each costs its packed content (up to hash.MaxKeyDigestBytes of digests), its
// annotations and labels (up to 256 KiB, a tenant's to fill), so they are bounded in bytes,
// not in count: the recent changes (baseline_recent.go) to recentMaxBytes, past which the
// namespace that holds the most loses its oldest, or a change of that namespace is not kept
// (as past recentSources); the objects noted on workloads to
// notedMaxBytes, past which a noted object is kept as its hashes only (sourcecache.Slim). A note is never
// dropped: it is what makes a change a workload missed reload. A slim note compares as the
// whole content: a workload that reads some keys of the source reloads on any change of it.
const (
	recentMaxBytes = 8 << 20
	notedMaxBytes  = 16 << 20
	// objectOverhead is what a cached object's metadata costs beside its strings.
	objectOverhead = 1 << 10
)

// retainedSize estimates what keeping a cached source object costs.
func retainedSize(o client.Object) int {
	if o == nil {
		return 0
	}
	n := objectOverhead + len(o.GetSelfLink()) + len(o.GetName()) + len(o.GetResourceVersion())
	for k, v := range o.GetAnnotations() {
		n += len(k) + len(v)
	}
	for k, v := range o.GetLabels() {
		n += len(k) + len(v)
	}
	return n
}

// keepNoted counts a noted object in, slimmed first when it is new to the notes and would
// take them past their budget. Called with b.mu held.
func (b *Baselines) keepNoted(o client.Object) client.Object {
	if o == nil {
		return nil
	}
	if b.notedRefs == nil {
		b.notedRefs = map[client.Object]int{}
	}
	if b.notedRefs[o] == 0 && b.notedBytes+retainedSize(o) > notedMaxBytes {
		o = sourcecache.Slim(o)
	}
	if b.notedRefs[o] == 0 {
		b.notedBytes += retainedSize(o)
	}
	b.notedRefs[o]++
	return o
}

// releaseNoted counts a noted object out. Called with b.mu held.
func (b *Baselines) releaseNoted(o client.Object) {
	if o == nil {
		return
	}
	if b.notedRefs[o]--; b.notedRefs[o] <= 0 {
		delete(b.notedRefs, o)
		b.notedBytes -= retainedSize(o)
	}
}
