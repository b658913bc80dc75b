package configstatus

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

// ReloadLog keeps, for each workload, its latest reload by each source, for the status of
// the ReloaderConfigs that target it: a config shows the latest reload by a source it chooses,
// even when another source reloaded the workload since. It is bounded: past its size the
// workload reloaded longest ago is dropped (the status it was written into keeps it).
type ReloadLog struct {
	mu      sync.Mutex
	entries map[workloadKey]*workloadReloads
	maxSize int
}

// workloadKey names a workload of a kind.
type workloadKey struct {
	kind string
	types.NamespacedName
}

// workloadReloads is what the log holds of one workload.
type workloadReloads struct {
	latest   time.Time
	bySource map[source.ID]LoggedReload
}

// LoggedReload is one reload by one source and, once known, how its rollout went.
type LoggedReload struct {
	At     time.Time
	Source source.ID
	Hash   string
	// Rollout and RolloutReason are the outcome of the rollout that followed, when known.
	Rollout, RolloutReason string
}

const (
	// defaultReloadLogSize holds the reloads of this many workloads.
	defaultReloadLogSize = 10_000
	// maxSourcesLogged bounds the sources held per workload.
	maxSourcesLogged = 64
)

// NewReloadLog returns a log of the reloads of up to size workloads (a default when 0).
func NewReloadLog(size int) *ReloadLog {
	if size <= 0 {
		size = defaultReloadLogSize
	}
	return &ReloadLog{entries: map[workloadKey]*workloadReloads{}, maxSize: size}
}

// Add records a reload written.
func (l *ReloadLog) Add(kind string, nn types.NamespacedName, at time.Time, changes []reload.Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := workloadKey{kind, nn}
	e, ok := l.entries[k]
	if !ok {
		if len(l.entries) >= l.maxSize {
			l.dropOldest()
		}
		e = &workloadReloads{bySource: map[source.ID]LoggedReload{}}
		l.entries[k] = e
	}
	e.latest = at
	for _, ch := range changes {
		if _, known := e.bySource[ch.ID]; !known && len(e.bySource) >= maxSourcesLogged {
			e.dropOldestSource()
		}
		e.bySource[ch.ID] = LoggedReload{At: at, Source: ch.ID, Hash: ch.Hash}
	}
}

// SetRollout records how the rollout after the workload's latest reload went; an outcome of
// an older reload (reloadedAt more than a second before it) is dropped.
func (l *ReloadLog) SetRollout(kind string, nn types.NamespacedName, reloadedAt time.Time, rollout, reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[workloadKey{kind, nn}]
	if !ok || reloadedAt.Before(e.latest.Add(-time.Second)) {
		return false
	}
	for id, r := range e.bySource {
		if r.At.Equal(e.latest) {
			r.Rollout, r.RolloutReason = rollout, reason
			e.bySource[id] = r
		}
	}
	return true
}

// Latest returns the latest reload of a workload by a source that chosen accepts.
func (l *ReloadLog) Latest(kind string, nn types.NamespacedName, chosen func(source.ID) bool) (LoggedReload, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[workloadKey{kind, nn}]
	if !ok {
		return LoggedReload{}, false
	}
	var best LoggedReload
	found := false
	for id, r := range e.bySource {
		if chosen(id) && (!found || r.At.After(best.At) || (r.At.Equal(best.At) && id.String() < best.Source.String())) {
			best, found = r, true
		}
	}
	return best, found
}

// dropOldest makes room. A full scan, but only when full, and reloads are rare next to it.
func (l *ReloadLog) dropOldest() {
	var oldest workloadKey
	var at time.Time
	first := true
	for k, e := range l.entries {
		if first || e.latest.Before(at) {
			oldest, at, first = k, e.latest, false
		}
	}
	delete(l.entries, oldest)
}

func (e *workloadReloads) dropOldestSource() {
	var oldest source.ID
	var at time.Time
	first := true
	for id, r := range e.bySource {
		if first || r.At.Before(at) {
			oldest, at, first = id, r.At, false
		}
	}
	delete(e.bySource, oldest)
}
