package controller_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// A ConfigMap used by 200 Deployments in namespace a changes, and just after it one used by
// one Deployment in namespace b. b's reload must not wait for a's backlog: the work queue
// and, with --reload-rate, the rate limiter's tokens take turns between namespaces. First
// come, first served, b rolled after all 200 (the queue: they were queued first; the rate
// limiter: their slots were reserved first).
func TestAFanOutInOneNamespaceDoesNotHoldBackAnother(t *testing.T) {
	const n = 200
	a, b := newNamespace(t), newNamespace(t)
	create(t, configMap(a, "cfg", map[string]string{"k": "v1"}), configMap(b, "cfg", map[string]string{"k": "v1"}))
	for i := range n {
		create(t, deployment(a, fmt.Sprintf("web-%03d", i), map[string]string{auto: "true"}, podSpec("cfg")))
	}
	create(t, deployment(b, "web", map[string]string{auto: "true"}, podSpec("cfg")))
	// Read as the watches have it: the polls are of a positive wait, and the times are those
	// at which the rolls reached the watch.
	_, rollsA := watchRolls(t, a)
	_, rollsB := watchRolls(t, b)
	for round, rate := range []float64{0, 50} {
		t.Run(fmt.Sprintf("reload-rate=%v", rate), func(t *testing.T) {
			stop := startReloader(t, a, func(o *options.Options) {
				o.Namespaces, o.ReloadRate, o.ReloadBurst = []string{a, b}, rate, 5
			})
			defer stop()
			if round == 0 {
				recorded(t, deployment(b, "web", nil, corev1.PodTemplateSpec{}))
				for i := range n {
					recorded(t, deployment(a, fmt.Sprintf("web-%03d", i), nil, corev1.PodTemplateSpec{}))
				}
			}
			idleControlPlane(t)
			time.Sleep(500 * time.Millisecond) // the rate's burst refills before the timing starts
			v := fmt.Sprint("v", round+2)
			changed := time.Now()
			update(t, configMap(a, "cfg", nil), func(c *corev1.ConfigMap) { c.Data["k"] = v })
			// Each namespace has its own watch: without a pause b's event may be handled
			// before a's 200 are queued, and the old queue would pass by luck.
			time.Sleep(50 * time.Millisecond)
			update(t, configMap(b, "cfg", nil), func(c *corev1.ConfigMap) { c.Data["k"] = v })
			testutil.Eventually(t, "every Deployment rolled", func() error {
				if got := rolledTimes(rollsA(), round+1) + rolledTimes(rollsB(), round+1); got < n+1 {
					return fmt.Errorf("%d of %d rolled", got, n+1)
				}
				return nil
			})
			bAt := rollsB()["web"][round]
			before, first, last := 0, bAt, bAt
			for _, ts := range rollsA() {
				if ts[round].Before(bAt) {
					before++
				}
				first, last = testutil.Earlier(first, ts[round]), testutil.Later(last, ts[round])
			}
			t.Logf("b rolled after %d of a's %d: b %v after the change, a from %v to %v", before, n, bAt.Sub(changed), first.Sub(changed), last.Sub(changed))
			if before > n/2 {
				t.Errorf("b rolled after %d of a's %d rolled, want it well before a's backlog drained (at most %d)", before, n, n/2)
			}
		})
	}
}

// rolledTimes counts the workloads rolled at least k times.
func rolledTimes(rolls map[string][]time.Time, k int) int {
	c := 0
	for _, ts := range rolls {
		if len(ts) >= k {
			c++
		}
	}
	return c
}
