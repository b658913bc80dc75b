package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// The follower's decisions, on objects in memory: what the API server would answer is in
// internal/controller/rollouts_test.go.

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newRollouts(deadline time.Duration) (*Rollouts, *events.FakeRecorder, *clock, *[]Outcome) {
	rec, c := events.NewFakeRecorder(10), &clock{now: time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)}
	var outcomes []Outcome
	t := &Rollouts{Deadline: deadline, Recorder: rec, Metrics: metrics.New(prometheus.NewRegistry(), false), Now: c.Now,
		OnOutcome: func(o Outcome) { outcomes = append(outcomes, o) }}
	return t, rec, c, &outcomes
}

// value reads a gauge or a counter.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetGauge().GetValue() + m.GetCounter().GetValue()
}

var cfgChange = []reload.Change{{ID: source.ID{Kind: source.ConfigMap, Name: "cfg"}, Hash: "h2"}}

func sts(gen, observed int64, updated int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u1", Generation: gen},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: observed, UpdatedReplicas: updated, ReadyReplicas: 2,
			AvailableReplicas: 2, CurrentRevision: "a", UpdateRevision: "b"},
	}
}

func TestRolloutDeadlineCountsFromTheLastProgress(t *testing.T) {
	r, rec, c, outcomes := newRollouts(time.Minute)
	kind := workload.StatefulSet()
	r.Follow(kind, sts(3, 2, 0), cfgChange)
	ctx := context.Background()

	c.now = c.now.Add(40 * time.Second)
	if res := r.check(ctx, kind, sts(3, 3, 0)); res.RequeueAfter != 20*time.Second {
		t.Fatalf("requeue after %v, want 20s (the deadline counts from the reload)", res.RequeueAfter)
	}
	c.now = c.now.Add(15 * time.Second)
	if res := r.check(ctx, kind, sts(3, 3, 1)); res.RequeueAfter != time.Minute {
		t.Fatalf("requeue after %v, want 1m: progress restarts the deadline", res.RequeueAfter)
	}
	c.now = c.now.Add(time.Minute)
	r.check(ctx, kind, sts(3, 3, 1))
	if len(*outcomes) != 1 || (*outcomes)[0].Outcome != RolloutStalled {
		t.Fatalf("outcomes %+v, want one stalled", *outcomes)
	}
	o := (*outcomes)[0]
	if o.Kind != "StatefulSet" || o.Namespace != "ns" || o.Name != "db" || len(o.Sources) != 1 || o.Sources[0].Name != "cfg" ||
		!strings.Contains(o.Reason, "1 of 2 replicas updated") || !strings.Contains(o.Reason, "no progress in 1m0s (--rollout-deadline)") {
		t.Errorf("outcome %+v", o)
	}
	if ev := <-rec.Events; !strings.HasPrefix(ev, "Warning RolloutStalled Rollout of StatefulSet db after change of") {
		t.Errorf("event %q", ev)
	}
	if len(r.followed) != 0 || value(r.Metrics.RolloutsFollowed) != 0 {
		t.Errorf("still following %d", len(r.followed))
	}
	if n := value(r.Metrics.RolloutOutcomes.WithLabelValues("StatefulSet", RolloutStalled)); n != 1 {
		t.Errorf("reloader_rollouts_total stalled = %v", n)
	}
}

func TestANewReloadReplacesTheRolloutFollowed(t *testing.T) {
	r, _, _, outcomes := newRollouts(time.Minute)
	kind := workload.StatefulSet()
	ctx := context.Background()
	r.Follow(kind, sts(3, 2, 0), cfgChange)
	r.Follow(kind, sts(4, 3, 2), cfgChange)
	if len(r.followed) != 1 || value(r.Metrics.RolloutsFollowed) != 1 {
		t.Fatalf("following %d rollouts of one workload", len(r.followed))
	}
	done := sts(4, 3, 2)
	done.Status.CurrentRevision = "b"
	r.check(ctx, kind, done) // generation 3 observed: complete for the first reload only
	if len(*outcomes) != 0 {
		t.Fatalf("outcome of the replaced rollout: %+v", *outcomes)
	}
	done.Status.ObservedGeneration = 4
	r.check(ctx, kind, done)
	if len(*outcomes) != 1 || (*outcomes)[0].Outcome != RolloutComplete {
		t.Fatalf("outcomes %+v, want one complete", *outcomes)
	}
}

func TestRolloutsOfOtherObjectsAreNotFollowed(t *testing.T) {
	r, _, _, outcomes := newRollouts(time.Minute)
	ctx := context.Background()
	r.Follow(workload.Job(), sts(3, 2, 0), cfgChange)   // a kind without rollouts
	r.Follow(workload.StatefulSet(), sts(3, 2, 0), nil) // nothing reloaded
	var none *Rollouts
	none.Follow(workload.StatefulSet(), sts(3, 2, 0), cfgChange) // following turned off
	if len(r.followed) != 0 {
		t.Fatalf("following %d", len(r.followed))
	}
	r.Follow(workload.StatefulSet(), sts(3, 2, 0), cfgChange)
	recreated := sts(1, 1, 2)
	recreated.UID = "u2"
	r.check(ctx, workload.StatefulSet(), recreated)
	if len(r.followed) != 0 || len(*outcomes) != 0 {
		t.Errorf("a new object under the name: following %d, outcomes %+v", len(r.followed), *outcomes)
	}
}

// A Deployment's controller reports the stall at its progress deadline, with its reason; the
// follower's own clock only backs it up, a little later.
func TestOwnProgressDeadlineIsLeftToTheKindsController(t *testing.T) {
	r, _, c, outcomes := newRollouts(time.Hour)
	kind := workload.Deployment()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), ProgressDeadlineSeconds: ptr.To[int32](20)},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2},
	}
	r.Follow(kind, d, cfgChange)
	c.now = c.now.Add(30 * time.Second)
	if res := r.check(context.Background(), kind, d); res.RequeueAfter != 50*time.Second || len(*outcomes) != 0 {
		t.Fatalf("requeue after %v, outcomes %+v; want 50s (20s + %v grace) and none yet", res.RequeueAfter, *outcomes, controllerGrace)
	}
	c.now = c.now.Add(50 * time.Second)
	r.check(context.Background(), kind, d)
	if len(*outcomes) != 1 || !strings.Contains((*outcomes)[0].Reason, "no progress in 1m20s (its progress deadline 20s passed and its controller reported nothing)") {
		t.Errorf("outcomes %+v", *outcomes)
	}
}
