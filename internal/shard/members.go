package shard

import (
	"fmt"
	"hash/fnv"
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

// liveness tells live members from dead ones by when this replica last saw each member Lease
// renewed, not by the renew time written in it: clocks of replicas may disagree, as client-go's
// leader election reasons too.
type liveness struct {
	duration time.Duration
	seen     map[string]sighting
}

type sighting struct {
	renewed  string // the Lease's renewTime as last read
	observed time.Time
	identity string
}

func newLiveness(d time.Duration) *liveness {
	return &liveness{duration: d, seen: map[string]sighting{}}
}

// observe takes the member Leases as listed now and returns the identities alive at now, and
// the Leases dead long enough to delete (three lease durations unrenewed).
func (l *liveness) observe(leases []*coordinationv1.Lease, now time.Time) (alive []string, stale []*coordinationv1.Lease) {
	present := map[string]bool{}
	for _, lease := range leases {
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			continue
		}
		present[lease.Name] = true
		renewed := ""
		if lease.Spec.RenewTime != nil {
			renewed = lease.Spec.RenewTime.Format(time.RFC3339Nano)
		}
		s, ok := l.seen[lease.Name]
		if !ok || s.renewed != renewed {
			s = sighting{renewed: renewed, observed: now}
		}
		s.identity = *lease.Spec.HolderIdentity
		l.seen[lease.Name] = s
		switch quiet := now.Sub(s.observed); {
		case quiet < l.duration:
			alive = append(alive, s.identity)
		case quiet > 3*l.duration:
			stale = append(stale, lease)
		}
	}
	for name := range l.seen {
		if !present[name] {
			delete(l.seen, name)
		}
	}
	return alive, stale
}
