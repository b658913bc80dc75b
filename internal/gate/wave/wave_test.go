package wave_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/gatetest"
	"github.com/reloader-operator/reloader/internal/gate/wave"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/waves"
	"github.com/reloader-operator/reloader/internal/workload"
)

const content = "0123456789abcdef0123"

// cluster is a namespace of Deployments that all use ConfigMap cfg.
type cluster struct {
	mu       sync.Mutex
	deploys  map[string]*appsv1.Deployment
	applied  map[string]bool
	affected int
}

func newCluster(names ...string) *cluster {
	c := &cluster{deploys: map[string]*appsv1.Deployment{}, applied: map[string]bool{}}
	for _, n := range names {
		c.deploys[n] = deployment(n, nil)
	}
	return c
}

func deployment(name string, ann map[string]string) *appsv1.Deployment {
	one := int32(1)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann, Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: &one},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1},
	}
}

// roll makes name hold the content, and its rollout complete (or stalled).
func (c *cluster) roll(name string, stalled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applied[name] = true
	if stalled {
		c.deploys[name].Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing,
			Reason: workload.ReasonProgressDeadlineExceeded, Message: "deadline exceeded"}}
	}
}

func (c *cluster) Kinds() []workload.Kind { return []workload.Kind{workload.Deployment()} }

func (c *cluster) Affected(_ context.Context, _ workload.Kind, ns string, id source.ID, _, _ map[string]string) []client.Object {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.affected++
	var out []client.Object
	for _, d := range c.deploys {
		if ns == "ns" && id.Name == "cfg" {
			out = append(out, d.DeepCopy())
		}
	}
	return out
}

func (c *cluster) Content(source.ID, client.Object) (string, bool) { return content, true }

func (c *cluster) Applied(_ context.Context, _ workload.Kind, obj client.Object, _ source.ID) (bool, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applied[obj.GetName()], true, nil
}

type gauges struct {
	halted *prometheus.GaugeVec
	held   *prometheus.CounterVec
}

func newGate(c *cluster, min int) (*wave.Gate, gauges) {
	m := gauges{
		halted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "halted"}, []string{"namespace", "kind", "name"}),
		held:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "held"}, []string{"reason"}),
	}
	clock := gatetest.NewClock()
	return wave.New(wave.Config{MinWorkloads: min, Cluster: c, Halted: m.halted, Held: m.held, Now: clock.Now}), m
}

func halted(t *testing.T, g *prometheus.GaugeVec) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.WithLabelValues("ns", "configmap", "cfg").Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

var inWaves = map[string]string{waves.Annotation: "true"}

// due is a change of cfg due on Deployment name, cfg annotated with ann.
func due(c *cluster, name string, ann map[string]string) *gatetest.Builder {
	return gatetest.For("ns", name, nil).Target(c.deploys[name].DeepCopy()).Changed(source.ConfigMap, "cfg", "h2", ann)
}

func check(t *testing.T, g gate.Gate, d gate.Due) gate.Verdict {
	t.Helper()
	v, err := g.Check(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestWavesRollTheCanaryFirstThenDoublingWaves(t *testing.T) {
	c := newCluster("b", "c", "d")
	c.deploys["a"] = deployment("a", map[string]string{waves.CanaryAnnotation: "true"})
	g, m := newGate(c, 0)

	// a, the canary, is wave 1 of 3: it goes.
	if v := check(t, g, due(c, "a", inWaves).Due()); v.Hold.Reason != "" {
		t.Fatalf("the canary held: %+v", v.Hold)
	}
	// b and c wait for a; d for a first.
	for _, n := range []string{"b", "c", "d"} {
		v := check(t, g, due(c, n, inWaves).Due())
		if v.Hold.Reason != waves.HoldWave || !strings.Contains(v.Hold.Why, "waits for deployment/a") {
			t.Fatalf("%s: %+v, want held for a", n, v.Hold)
		}
		if !v.Hold.Until.Equal(gatetest.Epoch.Add(wave.Recheck)) {
			t.Errorf("%s held until %v, want a recheck after %v", n, v.Hold.Until, wave.Recheck)
		}
		if len(v.Notices) != 1 || !v.Notices[0].Quiet || v.Notices[0].Once == "" || len(v.Notices[0].Count) != 1 {
			t.Errorf("%s: notices %+v, want one quiet wait, counted once", n, v.Notices)
		}
	}
	if v := check(t, g, due(c, "b", inWaves).Due()); !strings.Contains(v.Hold.Why, "wave 2 of 3") {
		t.Errorf("b: %q, want wave 2 of 3", v.Hold.Why)
	}
	c.roll("a", false)
	for _, n := range []string{"b", "c"} {
		if v := check(t, g, due(c, n, inWaves).Due()); v.Hold.Reason != "" {
			t.Fatalf("%s held once a completed: %+v", n, v.Hold)
		}
	}
	v := check(t, g, due(c, "d", inWaves).Due())
	if v.Hold.Reason != waves.HoldWave || !strings.Contains(v.Hold.Why, "wave 3 of 3") {
		t.Fatalf("d: %+v, want held for wave 2", v.Hold)
	}
	c.roll("b", false)
	c.roll("c", false)
	if v := check(t, g, due(c, "d", inWaves).Due()); v.Hold.Reason != "" {
		t.Fatalf("d held once b and c completed: %+v", v.Hold)
	}
	if got := halted(t, m.halted); got != 0 {
		t.Errorf("halted = %v, want 0", got)
	}
}

func TestAStalledMemberHaltsTheRestUntilResumedOrAborted(t *testing.T) {
	c := newCluster("a", "b", "c")
	g, m := newGate(c, 0)
	c.roll("a", true) // a, first by name, stalls

	v := check(t, g, due(c, "b", inWaves).Due())
	if v.Hold.Reason != waves.HoldHalted || !strings.Contains(v.Hold.Why, "deployment/a stalled") ||
		!strings.Contains(v.Hold.Why, "kubectl reloader resume|abort configmap/cfg -n ns") {
		t.Fatalf("b: %+v, want halted by a", v.Hold)
	}
	if !v.Hold.Until.Equal(gatetest.Epoch.Add(wave.HaltedRecheck)) {
		t.Errorf("halted until %v, want a recheck after %v", v.Hold.Until, wave.HaltedRecheck)
	}
	n := v.Notices[len(v.Notices)-1]
	if !n.Warning || n.Reason != wave.ReasonWavesHalted || n.Alert == nil || n.Alert.HeldBy != waves.HoldHalted {
		t.Fatalf("notice = %+v, want a WavesHalted warning with its alert", n)
	}
	if got := halted(t, m.halted); got != 1 {
		t.Errorf("halted = %v, want 1", got)
	}
	// c is halted by the same source: its own Event, no second alert.
	v = check(t, g, due(c, "c", inWaves).Due())
	if n := v.Notices[len(v.Notices)-1]; n.Reason != wave.ReasonWavesHalted || n.Alert != nil {
		t.Fatalf("c: %+v, want the halt said without a second alert", n)
	}

	// A resume of another content changes nothing; of this one, lets b go past a.
	if v := check(t, g, due(c, "b", map[string]string{waves.Annotation: "true", waves.ResumeAnnotation: "ffffffffffff"}).Due()); v.Hold.Reason != waves.HoldHalted {
		t.Fatalf("a resume of another content: %+v", v.Hold)
	}
	if v := check(t, g, due(c, "b", map[string]string{waves.Annotation: "true", waves.ResumeAnnotation: waves.Short(content)}).Due()); v.Hold.Reason != "" {
		t.Fatalf("resumed: %+v", v.Hold)
	}
	if got := halted(t, m.halted); got != 0 {
		t.Errorf("halted = %v once resumed, want 0", got)
	}

	// An abort settles the content without a roll, and says so.
	v = check(t, g, due(c, "c", map[string]string{waves.Annotation: "true", waves.AbortAnnotation: content}).Due())
	if v.Hold.Reason != "" || len(v.Settled) != 1 || v.Settled[0].ID.Name != "cfg" {
		t.Fatalf("aborted: %+v, want cfg settled and no hold", v)
	}
	if len(v.Notices) != 1 || v.Notices[0].Reason != wave.ReasonWavesAborted || !strings.Contains(v.Notices[0].Message, waves.Short(content)) {
		t.Fatalf("aborted: notices %+v", v.Notices)
	}
}

func TestAfterOrdersAndACycleIsSaid(t *testing.T) {
	c := newCluster("api")
	c.deploys["web"] = deployment("web", map[string]string{waves.AfterAnnotation: "deployment/api"})
	g, _ := newGate(c, 0)
	// Without waves, after alone orders: web waits for api.
	v := check(t, g, due(c, "web", nil).Due())
	if v.Hold.Reason != waves.HoldWave || !strings.Contains(v.Hold.Why, "deployment/api") {
		t.Fatalf("web: %+v, want held for api", v.Hold)
	}
	c.roll("api", false)
	if v := check(t, g, due(c, "web", nil).Due()); v.Hold.Reason != "" {
		t.Fatalf("web held once api completed: %+v", v.Hold)
	}
	// A cycle: said, and rolled as if without after.
	c.deploys["api"].Annotations = map[string]string{waves.AfterAnnotation: "deployment/web"}
	c.applied = map[string]bool{}
	g, _ = newGate(c, 0) // members found afresh
	v = check(t, g, due(c, "web", nil).Due())
	if v.Hold.Reason != "" || len(v.Notices) != 1 || v.Notices[0].Reason != wave.ReasonWavesCycle ||
		!strings.Contains(v.Notices[0].Message, "deployment/api -> deployment/web -> deployment/api") {
		t.Fatalf("cycle: %+v", v)
	}
	// A bad after reference is said, once per content of the error.
	c.deploys["web"].Annotations = map[string]string{waves.AfterAnnotation: "nokind/x"}
	g, _ = newGate(c, 0)
	v = check(t, g, due(c, "web", nil).Due())
	if len(v.Notices) == 0 || v.Notices[0].Reason != wave.ReasonInvalidAnnotation || v.Notices[0].Once == "" {
		t.Fatalf("bad after: %+v", v.Notices)
	}
	// A ReloaderConfig's after list counts as the annotation does.
	c.deploys["web"].Annotations = nil
	c.deploys["api"].Annotations = nil
	g, _ = newGate(c, 0)
	v = check(t, g, due(c, "web", nil).Overrides(reload.Overrides{After: []string{"deployment/api"}}).Due())
	if v.Hold.Reason != waves.HoldWave {
		t.Fatalf("after by config: %+v", v.Hold)
	}
}

func TestWavesByThresholdOrConfig(t *testing.T) {
	c := newCluster("a", "b", "c")
	g, _ := newGate(c, 3)
	if v := check(t, g, due(c, "c", nil).Due()); v.Hold.Reason != waves.HoldWave {
		t.Fatalf("3 members at --waves-min-workloads=3: %+v, want waves", v.Hold)
	}
	g4, _ := newGate(c, 4)
	if v := check(t, g4, due(c, "c", nil).Due()); v.Hold.Reason != "" {
		t.Fatalf("3 members under --waves-min-workloads=4: %+v, want no waves", v.Hold)
	}
	off, _ := newGate(c, 0)
	on := true
	if v := check(t, off, due(c, "c", nil).Overrides(reload.Overrides{Waves: &on}).Due()); v.Hold.Reason != waves.HoldWave {
		t.Fatalf("waves by a ReloaderConfig: %+v", v.Hold)
	}
}

func TestNothingDueOrHeldAheadHoldsNothingAndForgetsTheWake(t *testing.T) {
	c := newCluster("a", "b")
	clock := gatetest.NewClock()
	g := wave.New(wave.Config{Cluster: c, Now: clock.Now})
	var woken []string
	g.OnWake(func(t wave.Target) { woken = append(woken, t.Kind+"/"+t.Name) })

	if v := check(t, g, due(c, "b", inWaves).Due()); v.Hold.Reason != waves.HoldWave {
		t.Fatalf("b: %+v", v.Hold)
	}
	g.Ended("Deployment", "ns", "a")
	if len(woken) != 1 || woken[0] != "Deployment/b" {
		t.Fatalf("woken = %v, want b when a's rollout ended", woken)
	}
	// A rollout that ended while b's Check read it wakes b at once.
	woken = nil
	check(t, g, due(c, "b", inWaves).Due())
	if len(woken) != 1 {
		t.Fatalf("woken = %v, want b at once: a ended as it was read", woken)
	}
	for name, d := range map[string]gate.Due{
		"not due":    gatetest.For("ns", "b", nil).Due(),
		"held ahead": due(c, "b", inWaves).Ahead("quarantine", reload.Hold{Reason: "quarantine"}).Due(),
		"notified":   due(c, "b", inWaves).Notified().Due(),
	} {
		clock.Step(time.Second)
		check(t, g, due(c, "b", inWaves).Due())
		if v := check(t, g, d); v.Hold.Reason != "" || len(v.Notices) != 0 {
			t.Fatalf("%s: %+v, want nothing", name, v)
		}
		woken = nil
		g.Ended("Deployment", "ns", "a")
		if len(woken) != 0 {
			t.Fatalf("%s: woken %v, want the hint forgotten", name, woken)
		}
	}
	clock.Step(time.Second)
	check(t, g, due(c, "b", inWaves).Due())
	g.Forget("Deployment/ns/b")
	woken = nil
	g.Ended("Deployment", "ns", "a")
	if len(woken) != 0 {
		t.Fatalf("woken %v after Forget", woken)
	}
}

func TestDryRunKeepsNothingAndMemoizeReadsOnce(t *testing.T) {
	c := newCluster("a", "b")
	g, m := newGate(c, 0)
	var woken []string
	g.OnWake(func(t wave.Target) { woken = append(woken, t.Name) })
	c.roll("a", true)
	v := check(t, g, due(c, "b", inWaves).DryRun().Due())
	if v.Hold.Reason != waves.HoldHalted {
		t.Fatalf("dry run: %+v", v.Hold)
	}
	if n := v.Notices[len(v.Notices)-1]; n.Alert != nil {
		t.Error("a dry run's notice carries an alert")
	}
	if got := halted(t, m.halted); got != 0 {
		t.Errorf("a dry run set the halted gauge: %v", got)
	}
	g.Ended("Deployment", "ns", "a")
	if len(woken) != 0 {
		t.Errorf("a dry run left a wake hint: %v", woken)
	}
	// The controller's Check after it still alerts: the dry run marked nothing.
	if n := check(t, g, due(c, "b", inWaves).Due()).Notices; n[len(n)-1].Alert == nil {
		t.Error("the first live halt has no alert after a dry run")
	}

	e, _ := newGate(c, 0)
	e.Memoize()
	before := c.affected
	check(t, e, due(c, "b", inWaves).DryRun().Due())
	check(t, e, due(c, "a", inWaves).DryRun().Due())
	if got := c.affected - before; got != 1 {
		t.Errorf("a memoized gate looked members up %d times, want 1", got)
	}
}

func TestMembersRecentlyFoundAreReadAgainFromTheCache(t *testing.T) {
	c := newCluster("a", "b")
	cache := &reader{c: c}
	clock := gatetest.NewClock()
	g := wave.New(wave.Config{Cluster: c, Cache: cache, Now: clock.Now})
	check(t, g, due(c, "b", inWaves).Due())
	c.roll("a", false)
	// Found a moment ago: the members are not looked up again, a is read again.
	before := c.affected
	if v := check(t, g, due(c, "b", inWaves).Due()); v.Hold.Reason != "" {
		t.Fatalf("b held after a completed: %+v", v.Hold)
	}
	if c.affected != before || cache.gets == 0 {
		t.Fatalf("lookups %d, cache reads %d: want the members as found, read again", c.affected-before, cache.gets)
	}
	clock.Step(3 * time.Second)
	check(t, g, due(c, "b", inWaves).Due())
	if c.affected == before {
		t.Fatal("members not looked up again after a while")
	}
}

type reader struct {
	client.Reader
	c    *cluster
	gets int
}

func (r *reader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets++
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.c.deploys[key.Name].DeepCopyInto(obj.(*appsv1.Deployment))
	return nil
}
