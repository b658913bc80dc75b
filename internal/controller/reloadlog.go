package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/reloader-operator/reloader/internal/reload"
)

// ReloadLog keeps the latest reload of each workload, for the status of the ReloaderConfigs
// that target it. It is bounded: past its size the oldest reload is dropped (the status it
// was written into keeps it).
type ReloadLog struct {
	mu      sync.Mutex
	latest  map[workloadKey]LoggedReload
	maxSize int
}

// workloadKey names a workload of a kind.
type workloadKey struct {
	kind string
	types.NamespacedName
}

// LoggedReload is one reload and, once known, how its rollout went.
type LoggedReload struct {
	At      time.Time
	Changes []reload.Change
	// Rollout and RolloutReason are the outcome of the rollout that followed, when known.
	Rollout, RolloutReason string
}

// defaultReloadLogSize holds the latest reload of this many workloads.
const defaultReloadLogSize = 10_000

// NewReloadLog returns a log of the latest reload of up to size workloads (a default when 0).
func NewReloadLog(size int) *ReloadLog {
	if size <= 0 {
		size = defaultReloadLogSize
	}
	return &ReloadLog{latest: map[workloadKey]LoggedReload{}, maxSize: size}
}

// Add records a reload written.
func (l *ReloadLog) Add(kind string, nn types.NamespacedName, at time.Time, changes []reload.Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := workloadKey{kind, nn}
	if _, ok := l.latest[k]; !ok && len(l.latest) >= l.maxSize {
		l.dropOldest()
	}
	l.latest[k] = LoggedReload{At: at, Changes: append([]reload.Change(nil), changes...)}
}

// SetRollout records how the rollout after the reload at reloadedAt went; an outcome of an
// older reload is dropped.
func (l *ReloadLog) SetRollout(kind string, nn types.NamespacedName, reloadedAt time.Time, rollout, reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := workloadKey{kind, nn}
	e, ok := l.latest[k]
	if !ok || !e.At.Equal(reloadedAt) {
		return false
	}
	e.Rollout, e.RolloutReason = rollout, reason
	l.latest[k] = e
	return true
}

// Latest returns the latest reload of a workload.
func (l *ReloadLog) Latest(kind string, nn types.NamespacedName) (LoggedReload, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.latest[workloadKey{kind, nn}]
	return e, ok
}

// dropOldest makes room. A full scan, but only when full, and reloads are rare next to it.
func (l *ReloadLog) dropOldest() {
	var oldest workloadKey
	var at time.Time
	first := true
	for k, e := range l.latest {
		if first || e.At.Before(at) {
			oldest, at, first = k, e.At, false
		}
	}
	delete(l.latest, oldest)
}
