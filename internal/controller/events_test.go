package controller_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// Three reloads of one workload by one source are one Event series, not three Events: the
// Event names the workload without the resourceVersion each reload moves, so client-go's
// broadcaster keeps one cache entry for it however often it reloads.
func TestRepeatedReloadsAggregateIntoOneEventSeries(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)
	changes := templateChanges(t, d)
	for i := 2; i <= 4; i++ {
		update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = fmt.Sprintf("v%d", i) })
		testutil.Eventually(t, fmt.Sprintf("reload %d", i-1), func() error {
			if n := changes(); n != i-1 {
				return fmt.Errorf("%d template changes", n)
			}
			return nil
		})
	}
	uid := get(t, d).UID
	testutil.Eventually(t, "one Reloaded series", func() error {
		evs := eventsAbout(t, ns, "web", controller.ReasonReloaded)
		if len(evs) != 1 || evs[0].Series == nil || evs[0].Series.Count < 2 {
			return fmt.Errorf("%d Reloaded Events, want one series: %+v", len(evs), evs)
		}
		if r := evs[0].Regarding; r.ResourceVersion != "" || r.UID != uid || r.Kind != "Deployment" {
			return fmt.Errorf("regarding %+v, want the Deployment by UID without resourceVersion", r)
		}
		return nil
	})
}
