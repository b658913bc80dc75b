package wave

import (
	"context"
	"strings"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/reloader-operator/reloader/internal/waves"
)

// Wakes: a held target waits for blockers; the end of a blocker's rollout (Ended, from the
// rollout follower) queues it again at once, rather than at its next poll (Recheck).

// Queue is a source for the controller of kind: it hands the gate the controller's work
// queue, through which the gate wakes the held targets of that kind.
func (g *Gate) Queue(kind string) crsource.Source {
	return crsource.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		g.wakeMu.Lock()
		defer g.wakeMu.Unlock()
		if g.queues == nil {
			g.queues = map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]{}
		}
		g.queues[kind] = q
		return nil
	})
}

// OnWake sets how a held target of a kind without Queue is queued again (a test's).
func (g *Gate) OnWake(f func(Target)) {
	g.wakeMu.Lock()
	g.enqueue = f
	g.wakeMu.Unlock()
}

// queue queues t again. Called with g.wakeMu held.
func (g *Gate) queue(t Target) {
	if q := g.queues[t.Kind]; q != nil {
		q.Add(reconcile.Request{NamespacedName: t.NamespacedName})
	} else if g.enqueue != nil {
		g.enqueue(t)
	}
}

func blockerKey(ns string, ref waves.Ref) string { return ns + "/" + ref.String() }

// wakeOn notes that target k (t) waits for blockers (none: it waits for nothing), as read at
// read: a blocker whose rollout ended since queues it again at once.
func (g *Gate) wakeOn(k string, t Target, blockers []waves.Ref, read time.Time) {
	g.wakeMu.Lock()
	defer g.wakeMu.Unlock()
	for b, held := range g.wake {
		if _, ok := held[k]; ok {
			delete(held, k)
			if len(held) == 0 {
				delete(g.wake, b)
			}
		}
	}
	if len(blockers) == 0 {
		return
	}
	if g.wake == nil {
		g.wake = map[string]map[string]Target{}
	}
	for _, b := range blockers {
		key := blockerKey(t.Namespace, b)
		if at, ok := g.ended[key]; ok && !at.Before(read) {
			g.queue(t)
			continue
		}
		if g.wake[key] == nil {
			g.wake[key] = map[string]Target{}
		}
		g.wake[key][k] = t
	}
}

// Ended queues again the targets held for the workload whose rollout ended (kind as the
// rollout follower names it); it does not block.
func (g *Gate) Ended(kind, namespace, name string) {
	key := blockerKey(namespace, waves.Ref{Kind: strings.ToLower(kind), Name: name})
	now := g.c.Now()
	g.wakeMu.Lock()
	defer g.wakeMu.Unlock()
	if g.ended == nil {
		g.ended = map[string]time.Time{}
	}
	if now.Sub(g.pruned) > 10*time.Second {
		g.pruned = now
		for k, at := range g.ended {
			if now.Sub(at) > time.Minute {
				delete(g.ended, k)
			}
		}
	}
	g.ended[key] = now
	for _, t := range g.wake[key] {
		g.queue(t)
	}
	delete(g.wake, key)
}
