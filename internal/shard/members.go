package shard

import (
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// GroupLabel marks the member Leases of one sharded install (its value is the Lease prefix).
const GroupLabel = "reloader.dev/shard-group"

// memberLeaseName names a replica's member Lease: identities (host_uuid) are no valid names.
func memberLeaseName(prefix, identity string) string {
	h := fnv.New64a()
	h.Write([]byte(identity))
	return fmt.Sprintf("%s-member-%016x", prefix, h.Sum64())
}

// shardLeaseName names the Lease of shard i.
func shardLeaseName(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

// liveness tells whether the holder of a Lease (a member's, a shard's) has gone: a Lease
// expires once both
//
//   - the renewTime written in it is older than its lease duration, by this replica's clock,
//     and
//   - this replica has seen no renewal for the lease duration (counted from when the watch
//     brought the last one, so within milliseconds of the write).
//
// The later of the two counts, so that a clock ahead or behind another replica's never makes
// a live holder look gone sooner (client-go's leader election trusts only what it saw, and
// counts from when its election started looking: a shard taken after its member's death
// waited a second full lease). Both rules are read from the Lease as written, so a Lease
// watched for as long as it went unrenewed expires within milliseconds of
// renewTime + duration.
type liveness struct {
	duration time.Duration

	mu   sync.Mutex
	seen map[string]sighting
}

type sighting struct {
	renewed  string // the Lease's renewTime as last read
	observed time.Time
}

func newLiveness(d time.Duration) *liveness {
	return &liveness{duration: d, seen: map[string]sighting{}}
}

// saw notes the Lease as the watch brought it at now.
func (l *liveness) saw(lease *coordinationv1.Lease, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	renewed := renewedAt(lease)
	if s, ok := l.seen[lease.Name]; !ok || s.renewed != renewed {
		l.seen[lease.Name] = sighting{renewed: renewed, observed: now}
	}
}

// forget drops a Lease deleted.
func (l *liveness) forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.seen, name)
}

// expiry is when lease expires (see liveness), with now noted as its sighting if it has none.
func (l *liveness) expiry(lease *coordinationv1.Lease, now time.Time) time.Time {
	l.saw(lease, now)
	l.mu.Lock()
	observed := l.seen[lease.Name].observed
	l.mu.Unlock()
	d := l.duration
	if lease.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	at := observed.Add(d)
	if lease.Spec.RenewTime != nil {
		at = later(at, lease.Spec.RenewTime.Add(d))
	}
	return at
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func renewedAt(lease *coordinationv1.Lease) string {
	if lease.Spec.RenewTime == nil {
		return ""
	}
	return lease.Spec.RenewTime.Format(time.RFC3339Nano)
}

func holder(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// members returns the identities of the member Leases alive at now, the Leases dead long
// enough to delete (three lease durations past their expiry), and the earliest expiry to come.
func (l *liveness) members(leases []*coordinationv1.Lease, now time.Time) (alive []string, stale []*coordinationv1.Lease, next time.Time) {
	for _, lease := range leases {
		id := holder(lease)
		if id == "" {
			continue
		}
		switch at := l.expiry(lease, now); {
		case at.After(now):
			alive = append(alive, id)
			if next.IsZero() || at.Before(next) {
				next = at
			}
		case now.Sub(at) > 2*l.duration:
			stale = append(stale, lease)
		}
	}
	return alive, stale, next
}
