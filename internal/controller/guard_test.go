package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/report"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// apiWrite is one write of Deployments a client sent, as the API server answered it.
type apiWrite struct {
	at   time.Time
	verb string
	path string
	code int
}

// writeLog counts, client side, the writes of Deployments sent through a rest.Config.
type writeLog struct {
	mu     sync.Mutex
	writes []apiWrite
}

func (l *writeLog) config() *rest.Config {
	cfg := rest.CopyConfig(restConfig)
	wrap := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			at := time.Now()
			res, err := rt.RoundTrip(req)
			if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/deployments") {
				code := 0
				if res != nil {
					code = res.StatusCode
				}
				l.mu.Lock()
				l.writes = append(l.writes, apiWrite{at, req.Method, req.URL.Path, code})
				l.mu.Unlock()
			}
			return res, err
		})
	}
	return cfg
}

func (l *writeLog) all() []apiWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// maxInOneSecond is the most writes sent within any one second.
func maxInOneSecond(ws []apiWrite) int {
	most := 0
	for i := range ws {
		n := 0
		for _, w := range ws[i:] {
			if w.at.Sub(ws[i].at) < time.Second {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// Reloads race the status writes of the workloads' own controller (here a writer that
// updates the status of every Deployment without pause, as a Deployment controller does
// through a rollout): none of reloader's patches meets a 409, and each change rolls each
// Deployment once, on the latest content. The patch tests what the decision read, which a
// status write does not touch; a resourceVersion would have conflicted.
func TestStatusWritesDoNotConflictWithReloads(t *testing.T) {
	const n, rounds = 10, 4
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v0"})
	create(t, cm)
	var ds []*appsv1.Deployment
	for i := range n {
		d := deployment(ns, fmt.Sprintf("web-%02d", i), map[string]string{auto: "true"}, podSpec("cfg"))
		create(t, d)
		ds = append(ds, d)
	}
	var wl writeLog
	startReloaderAs(t, wl.config(), ns)
	for _, d := range ds {
		recorded(t, d)
	}
	rolls := make([]func() int, n)
	for i, d := range ds {
		rolls[i] = templateChanges(t, d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var statusWrites atomic.Int64
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				d := &appsv1.Deployment{}
				if k8s.Get(ctx, client.ObjectKeyFromObject(ds[(i*2+w)%n]), d) != nil {
					continue
				}
				d.Status.ObservedGeneration = d.Generation
				d.Status.Replicas = int32(i % 5)
				d.Status.UpdatedReplicas = int32(i % 3)
				if k8s.Status().Update(ctx, d) == nil {
					statusWrites.Add(1)
				}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	start := len(wl.all())
	for round := 1; round <= rounds; round++ {
		update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = fmt.Sprint("v", round) })
		testutil.Eventually(t, fmt.Sprintf("round %d rolled every Deployment", round), func() error {
			for i, roll := range rolls {
				if got := roll(); got < round {
					return fmt.Errorf("%s rolled %d times", ds[i].Name, got)
				}
			}
			return nil
		})
	}
	before := statusWrites.Load()
	handledAll(t, objects(ds...), cm)
	cancel()
	wg.Wait()

	writes := wl.all()[start:]
	var conflicts, patches int
	for _, w := range writes {
		if w.code == http.StatusConflict {
			conflicts++
		}
		if w.verb == http.MethodPatch && w.code < 300 {
			patches++
		}
	}
	t.Logf("%d reload patches, %d status writes meanwhile, %d conflicts", patches, before, conflicts)
	if before < int64(rounds*n) {
		t.Fatalf("only %d status writes during the reloads: no race", before)
	}
	if patches < rounds*n {
		t.Errorf("%d patches for %d reloads", patches, rounds*n)
	}
	if conflicts != 0 {
		t.Errorf("%d of reloader's writes met a 409 while status writes raced them", conflicts)
	}
	for i, roll := range rolls {
		if got := roll(); got != rounds {
			t.Errorf("%s rolled %d times, want %d", ds[i].Name, got, rounds)
		}
	}
	for _, d := range ds {
		if v, _ := envOf(&get(t, d).Spec.Template, "app", cfgEnv); v == "" {
			t.Errorf("%s carries no reload", d.Name)
		}
	}
}

// A decision made on a copy whose record annotation has changed since is not written: the
// patch fails, the reconcile counts a conflict and comes back, and the retry decides from the
// fresh copy. The record is changed through the status subresource, as a Deployment's
// controller writes its revision annotation: the generation does not move, so only the test
// of the annotation can catch it.
func TestADecisionOnAStaleRecordIsNotWritten(t *testing.T) {
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	web := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	twin := deployment(ns, "twin", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, web, twin)
	m := metrics.New(prometheus.NewRegistry(), false)
	events := &reasons{n: map[string]int{}}
	r := &controller.WorkloadReconciler{
		Client: k8s, Kind: workload.Deployment(), Reads: controller.Reads{Sources: []sourcecache.SourceType{sourcecache.ConfigMaps}},
		Settings: controller.Settings{Policy: reload.Policy{Keys: reload.DefaultKeys()}, Strategy: envVars(t)}, Window: coalesce.New(0),
		Report: report.New(events, m, nil), Now: time.Now,
	}
	ctx := log.IntoContext(context.Background(), testLogger())
	for _, d := range []*appsv1.Deployment{web, twin} {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(d)}); err != nil {
			t.Fatalf("first reconcile of %s: %v", d.Name, err)
		}
		recorded(t, d)
	}
	stale := get(t, web).DeepCopy() // recorded at v1
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	// The twin reloads; its record is the one web would get for v2.
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(twin)}); err != nil {
		t.Fatalf("reload of twin: %v", err)
	}
	v2 := get(t, twin).Annotations[reload.RecordAnnotation]
	if v2 == stale.Annotations[reload.RecordAnnotation] {
		t.Fatal("the twin's record did not move with the change")
	}
	// Meanwhile another writer records v2 on web, through the status subresource.
	cur := get(t, web)
	cur.Annotations[reload.RecordAnnotation] = v2
	testutil.Must(t, k8s.Status().Update(context.Background(), cur))
	if now := get(t, web); now.Annotations[reload.RecordAnnotation] != v2 || now.Generation != stale.Generation {
		t.Fatalf("the status write left record %q, generation %d (was %d): not the race this test needs",
			now.Annotations[reload.RecordAnnotation], now.Generation, stale.Generation)
	}
	rollouts := templateChanges(t, web)

	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(web)}
	r.Client = staleReads{Client: k8s, stale: stale}
	res, err := r.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("reconcile from the stale copy: %+v, %v; want no error and a retry", res, err)
	}
	var conflicts dto.Metric
	_ = m.Reconciles.WithLabelValues("Deployment", metrics.OutcomeConflict).Write(&conflicts)
	if got := conflicts.GetCounter().GetValue(); got != 1 {
		t.Errorf("%v reconciles counted as conflict, want 1", got)
	}
	if v, ok := envOf(&get(t, web).Spec.Template, "app", cfgEnv); ok {
		t.Errorf("the decision from the stale copy was written: %s=%q", cfgEnv, v)
	}
	if got := get(t, web).Annotations[reload.RecordAnnotation]; got != v2 {
		t.Errorf("the record written meanwhile was overwritten: %q", got)
	}

	// The retry reads the fresh copy: its record says v2 is applied, so nothing rolls.
	r.Client = k8s
	if outcome, err := r.ReconcileCopy(ctx, get(t, web)); err != nil || outcome != metrics.OutcomeUnchanged {
		t.Errorf("the retry from the fresh copy: %s, %v; want unchanged", outcome, err)
	}
	// No manager runs here: the reconciles above have returned, and rollouts catches up.
	if n := rollouts(); n != 0 {
		t.Errorf("web's template changed %d times, want 0", n)
	}
	if n := events.count(controller.ReasonReloaded); n != 1 { // the twin's
		t.Errorf("%d Reloaded Events, want 1 (the twin's)", n)
	}
}

// Installing onto Deployments whose sources do not change writes one first record each,
// within the default write budget (--first-sight-rate 20, one at a time), none refused: 20
// a second over the install, and not many more in any one second (slots are handed out one
// every 50 ms, but a slot may be taken up to 10 ms early, and a workload whose requeue comes
// late on a loaded machine writes next to the following ones). Before, at 50/s with a burst
// of 50, the first second held about 100.
func TestInstallStaysWithinTheWriteBudget(t *testing.T) {
	const n, budget = 60, 20
	ns := newNamespace(t)
	create(t, configMap(ns, "cfg", map[string]string{"k": "v1"}))
	var ds []*appsv1.Deployment
	for i := range n {
		d := deployment(ns, fmt.Sprintf("web-%02d", i), map[string]string{auto: "true"}, podSpec("cfg"))
		create(t, d)
		ds = append(ds, d)
	}
	var wl writeLog
	idleControlPlane(t)
	startReloaderAs(t, wl.config(), ns) // the defaults
	for _, d := range ds {
		recorded(t, d)
	}
	handledAll(t, objects(ds...))
	writes := wl.all()
	for _, w := range writes {
		if w.code >= 300 {
			t.Errorf("%s %s answered %d", w.verb, w.path, w.code)
		}
	}
	spread := writes[len(writes)-1].at.Sub(writes[0].at)
	most := maxInOneSecond(writes)
	t.Logf("%d writes for %d Deployments over %v, at most %d in one second", len(writes), n, spread, most)
	if len(writes) != n {
		t.Errorf("%d writes of Deployments, want %d (one first record each)", len(writes), n)
	}
	if most > budget+budget/4 {
		t.Errorf("%d writes within one second, budget %d", most, budget)
	}
	if want := time.Duration(n-1) * time.Second / budget; spread < want*95/100 {
		t.Errorf("the first records took %v, want at least %v (%d a second)", spread, want, budget)
	}
}
