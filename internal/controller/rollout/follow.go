// Package rollout follows, after each reload, the workload's rollout until it completes or
// stalls (Events RolloutComplete and RolloutStalled, reloader_rollouts_total, and the
// ReloaderConfig status through OnOutcome).
package rollout

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/internal/alert"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/termsafe"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Event reasons and outcomes of a followed rollout.
const (
	ReasonRolloutComplete = "RolloutComplete"
	ReasonRolloutStalled  = "RolloutStalled"

	RolloutComplete = "complete"
	RolloutStalled  = "stalled"
)

// Outcome is how the rollout that followed a reload ended.
type Outcome struct {
	Kind, Namespace, Name string
	// Sources are the changes the reload carried.
	Sources    []alert.Source
	ReloadedAt time.Time
	// Outcome is RolloutComplete or RolloutStalled; Reason says how far the rollout got and,
	// when it stalled, why.
	Outcome, Reason string
	Time            time.Time
}

// Rollouts follows, after each reload, the workload's rollout in its status until it
// completes or stalls, and says so in an Event, a metric and OnOutcome. Only followed
// workloads are looked at: the status churn of every other workload stops at a map lookup.
// It holds at most one rollout per workload (a new reload replaces the one followed), and
// forgets a workload once its rollout ended or it is deleted.
type Rollouts struct {
	// Deadline is how long a rollout may show no progress before it counts as stalled, for
	// kinds that keep no deadline of their own (StatefulSets, DaemonSets, DeploymentConfigs).
	Deadline time.Duration
	Recorder recorder.EventRecorder
	Metrics  *metrics.Metrics
	// OnOutcome, when set, hears every outcome, from the follower's goroutine: it must not block.
	OnOutcome func(Outcome)
	Now       func() time.Time

	mu       sync.Mutex
	followed map[followKey]*following
	// queues are the work queues of the followers, by kind name, once they have started.
	queues map[string]workqueueOf
}

// controllerGrace is how long past a kind's own progress deadline the follower waits for
// the kind's controller to report the stall before it says so itself.
const controllerGrace = time.Minute

type workqueueOf = workqueue.TypedRateLimitingInterface[reconcile.Request]

type followKey struct {
	kind string
	types.NamespacedName
}

// following is one rollout followed.
type following struct {
	uid        types.UID
	generation int64
	sources    []alert.Source
	reloadedAt time.Time
	// why is the progress last seen, since when it was first seen: a deadline counts from it.
	why   string
	since time.Time
}

// Follow starts following the rollout of obj, as just written by a reload of changes. Kinds
// with no rollout (Jobs, CronJobs) are not followed; a nil Rollouts follows nothing.
func (t *Rollouts) Follow(kind workload.Kind, obj client.Object, changes []reload.Change) {
	if t == nil || len(changes) == 0 {
		return
	}
	if _, ok := kind.(workload.Progressing); !ok {
		return
	}
	now := t.Now()
	key := followKey{kind.Name(), client.ObjectKeyFromObject(obj)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.followed == nil {
		t.followed = map[followKey]*following{}
	}
	t.followed[key] = &following{uid: obj.GetUID(), generation: obj.GetGeneration(), sources: alert.SourcesOf(changes),
		reloadedAt: now, since: now}
	t.Metrics.RolloutsFollowed.Set(float64(len(t.followed)))
	// The status event of the write may have passed the predicate before the entry existed.
	if q := t.queues[key.kind]; q != nil {
		q.Add(reconcile.Request{NamespacedName: key.NamespacedName})
	}
}

// follows reports whether the rollout of obj, of the kind named kind, is followed.
func (t *Rollouts) follows(kind string, obj client.Object) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.followed[followKey{kind, client.ObjectKeyFromObject(obj)}]
	return ok
}

// Follows reports whether the rollout of obj, of kind, is followed: its status is read then.
func (t *Rollouts) Follows(kind workload.Kind) func(client.Object) bool {
	name := kind.Name()
	return func(obj client.Object) bool { return t != nil && t.follows(name, obj) }
}

// statusMissing reports whether obj is the cached copy of a followed workload, at or past
// the generation reloaded, whose status the cache dropped.
func (t *Rollouts) statusMissing(kind string, obj client.Object) bool {
	f, ok := t.get(followKey{kind, client.ObjectKeyFromObject(obj)})
	return ok && obj.GetGeneration() >= f.generation && workload.StatusDropped(obj)
}

func (t *Rollouts) get(key followKey) (*following, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.followed[key]
	return f, ok
}

// forget stops following key, unless a newer reload replaced f meanwhile; nil f forgets
// whatever is followed. It reports whether it did.
func (t *Rollouts) forget(key followKey, f *following) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	current, ok := t.followed[key]
	if !ok || (f != nil && current != f) {
		return false
	}
	delete(t.followed, key)
	t.Metrics.RolloutsFollowed.Set(float64(len(t.followed)))
	return true
}

func (t *Rollouts) setQueue(kind string, q workqueueOf) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.queues == nil {
		t.queues = map[string]workqueueOf{}
	}
	t.queues[kind] = q
	for key := range t.followed {
		if key.kind == kind {
			q.Add(reconcile.Request{NamespacedName: key.NamespacedName})
		}
	}
}

// check reads the rollout of obj from its status and ends the following when the rollout
// has completed or stalled; otherwise it returns when to look again without an event.
func (t *Rollouts) check(ctx context.Context, kind workload.Kind, obj client.Object) reconcile.Result {
	key := followKey{kind.Name(), client.ObjectKeyFromObject(obj)}
	f, ok := t.get(key)
	if !ok {
		return reconcile.Result{}
	}
	if f.uid != obj.GetUID() {
		// Deleted and created again under the name: not the object reloaded.
		t.forget(key, f)
		return reconcile.Result{}
	}
	p := kind.(workload.Progressing).Progress(obj, f.generation)
	now := t.Now()
	t.mu.Lock()
	if p.Why != f.why {
		if f.why != "" { // the first look is not progress: the deadline counts from the reload
			f.since = now
		}
		f.why = p.Why
	}
	since := f.since
	t.mu.Unlock()
	switch p.State {
	case workload.RolloutComplete:
		t.end(ctx, kind, obj, key, f, RolloutComplete, p.Why)
	case workload.RolloutStalled:
		t.end(ctx, kind, obj, key, f, RolloutStalled, p.Why)
	case workload.RolloutUntracked:
		log.FromContext(ctx).V(1).Info("not following the rollout", "why", p.Why)
		t.forget(key, f)
	case workload.RolloutProgressing:
		deadline, whose := t.Deadline, "--rollout-deadline"
		if p.Deadline > 0 {
			// The kind's controller reports a stall itself, with its reason; this only backs
			// it up, when no controller runs or it said nothing.
			deadline = p.Deadline + controllerGrace
			whose = fmt.Sprintf("its progress deadline %s passed and its controller reported nothing", p.Deadline)
		}
		left := since.Add(deadline).Sub(now)
		if left <= 0 {
			t.end(ctx, kind, obj, key, f, RolloutStalled,
				fmt.Sprintf("%s; no progress in %s (%s)", p.Why, deadline, whose))
			return reconcile.Result{}
		}
		return reconcile.Result{RequeueAfter: left}
	}
	// Paused: no deadline runs; the resume changes the object, and its event comes here.
	return reconcile.Result{}
}

// end reports how the rollout ended, once, and stops following it. A rollout replaced by a
// newer reload meanwhile is not reported: the newer one is.
func (t *Rollouts) end(ctx context.Context, kind workload.Kind, obj client.Object, key followKey, f *following, outcome, why string) {
	if !t.forget(key, f) {
		return
	}
	what := fmt.Sprintf("Rollout of %s %s after change of %s", kind.Name(), obj.GetName(), alert.Describe(f.sources))
	if outcome == RolloutComplete {
		log.FromContext(ctx).Info("rollout complete", "progress", why)
		t.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonRolloutComplete, "Rollout", "%s", termsafe.ClipNote(what+" complete: "+why))
	} else {
		log.FromContext(ctx).Info("rollout stalled", "why", why)
		t.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonRolloutStalled, "Rollout", "%s", termsafe.ClipNote(what+" stalled: "+why))
	}
	t.Metrics.RolloutOutcomes.WithLabelValues(kind.Name(), outcome).Inc()
	if t.OnOutcome != nil {
		t.OnOutcome(Outcome{Kind: kind.Name(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Sources: f.sources,
			ReloadedAt: f.reloadedAt, Outcome: outcome, Reason: why, Time: t.Now()})
	}
}
