package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// A ConfigMap used by 200 Deployments in namespace a changes, and just after it one used by
// one Deployment in namespace b. b's reload must not wait for a's backlog: the work queue
// and, with --reload-rate, the rate limiter's tokens take turns between namespaces.
//
// It is measured in reloader's own signals, so that only its queue and limiter count, not
// how late the machine let b's change be written or heard: from when b's reload was due
// (reloader's informer delivered b's change, plus the coalescing window), how many of a's
// reloads began before b's (their reconciles, as Metrics.Hook hears them). Taking turns, a
// few: those taken meanwhile. First come, first served, every one of a's still queued (the
// queue: they were queued first; the rate limiter: their slots were reserved first). A
// change after which a's backlog was mostly gone when b's reload was due measures nothing
// and is made again.
func TestAFanOutInOneNamespaceDoesNotHoldBackAnother(t *testing.T) {
	const n, window, tries = 200, 100 * time.Millisecond, 3
	a, b := newNamespace(t), newNamespace(t)
	create(t, configMap(a, "cfg", map[string]string{"k": "v1"}), configMap(b, "cfg", map[string]string{"k": "v1"}))
	for i := range n {
		create(t, deployment(a, fmt.Sprintf("web-%03d", i), map[string]string{auto: "true"}, podSpec("cfg")))
	}
	create(t, deployment(b, "web", map[string]string{auto: "true"}, podSpec("cfg")))
	changes := 0
	for round, rate := range []float64{0, 50} {
		t.Run(fmt.Sprintf("reload-rate=%v", rate), func(t *testing.T) {
			stop := startReloader(t, a, func(o *options.Options) {
				o.Namespaces, o.ReloadRate, o.ReloadBurst, o.CoalesceWindow = []string{a, b}, rate, 5, window
			})
			defer stop()
			rel := reloaders.in(a)
			if round == 0 {
				recorded(t, deployment(b, "web", nil, corev1.PodTemplateSpec{}))
				for i := range n {
					recorded(t, deployment(a, fmt.Sprintf("web-%03d", i), nil, corev1.PodTemplateSpec{}))
				}
			}
			heard := hearSource(t, rel, b, "cfg")
			var backlogs []int
			for range tries {
				idleControlPlane(t)
				time.Sleep(500 * time.Millisecond) // the rate's burst refills before the timing starts
				changes++
				v := fmt.Sprint("v", changes+1)
				changed := time.Now()
				update(t, configMap(a, "cfg", nil), func(c *corev1.ConfigMap) { c.Data["k"] = v })
				// Each namespace has its own watch: without a pause b's event may be handled
				// before a's 200 are queued, and a first come, first served queue would pass.
				time.Sleep(50 * time.Millisecond)
				cmB := configMap(b, "cfg", nil)
				update(t, cmB, func(c *corev1.ConfigMap) { c.Data["k"] = v })
				due := heard(cmB.ResourceVersion).Add(window)
				var ahead, backlog int
				var first, last, bAt time.Time
				testutil.Eventually(t, "every Deployment reloaded", func() error {
					var reloadsA int
					ahead, backlog, reloadsA, first, last, bAt = rel.reloadsAround(a, b, changed, due)
					if reloadsA < n || bAt.IsZero() {
						return fmt.Errorf("%d of a's %d reloads, b's: %v", reloadsA, n, !bAt.IsZero())
					}
					return nil
				})
				t.Logf("b's reload began %v after the change, due at %v; a's reloads began from %v to %v; of the %d still to begin when b's was due, %d began before it",
					bAt.Sub(changed), due.Sub(changed), first.Sub(changed), last.Sub(changed), backlog, ahead)
				if backlog < n/4 {
					backlogs = append(backlogs, backlog)
					continue // a's fan-out was (nearly) over: nothing to take turns with
				}
				if ahead > backlog/2 {
					t.Errorf("%d of a's %d reloads still to begin when b's was due began before it, want b's well before a's backlog drained (at most %d)", ahead, backlog, backlog/2)
				}
				return
			}
			t.Errorf("in %d tries a's backlog was below %d when b's reload was due (%v): nothing measured", tries, n/4, backlogs)
		})
	}
}

// hearSource notes when rel's informer delivers each version of the ConfigMap ns/name, which
// is when reloader's own handlers hear of it; the function returned waits for a version's
// delivery and returns its time.
func hearSource(t *testing.T, rel *running, ns, name string) func(resourceVersion string) time.Time {
	t.Helper()
	informer, err := rel.mgr.GetCache().GetInformer(context.Background(), &corev1.ConfigMap{})
	testutil.Must(t, err)
	var mu sync.Mutex
	at := map[string]time.Time{}
	note := func(o any) {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Namespace == ns && cm.Name == name {
			now := time.Now()
			mu.Lock()
			at[cm.ResourceVersion] = now
			mu.Unlock()
		}
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }})
	testutil.Must(t, err)
	t.Cleanup(func() { _ = informer.RemoveEventHandler(reg) })
	return func(rv string) time.Time {
		t.Helper()
		var heard time.Time
		testutil.Eventually(t, "reloader heard "+ns+"/"+name+" at resourceVersion "+rv, func() error {
			mu.Lock()
			defer mu.Unlock()
			var ok bool
			if heard, ok = at[rv]; !ok {
				return fmt.Errorf("not delivered")
			}
			return nil
		})
		return heard
	}
}

// reloadsAround reads the reloads r wrote, in reconciles begun since changed: when b's
// Deployment "web" began its reload (bAt), how many of namespace a's Deployments reloaded
// (reloadsA), how many of their reloads began after due (backlog), and of those how many
// before bAt (ahead); and when a's reloads began, first and last.
func (r *running) reloadsAround(a, b string, changed, due time.Time) (ahead, backlog, reloadsA int, first, last, bAt time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.log {
		if rec.Kind == "Deployment" && rec.Namespace == b && rec.Name == "web" && rec.Outcome == metrics.OutcomeReloaded && rec.Started.After(changed) {
			bAt = rec.Started
			break
		}
	}
	first, last = bAt, bAt
	reloaded := map[string]bool{}
	for _, rec := range r.log {
		if rec.Kind != "Deployment" || rec.Namespace != a || rec.Outcome != metrics.OutcomeReloaded || !rec.Started.After(changed) {
			continue
		}
		reloaded[rec.Name] = true
		first, last = testutil.Earlier(first, rec.Started), testutil.Later(last, rec.Started)
		if rec.Started.After(due) {
			backlog++
			if rec.Started.Before(bAt) {
				ahead++
			}
		}
	}
	return ahead, backlog, len(reloaded), first, last, bAt
}
