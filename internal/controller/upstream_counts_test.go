package controller_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// Upstream counts a source update without a content change as a no_data_change skip and a
// reconcile with result "skipped"; a resync of the cache (same resourceVersion), which
// upstream's informers never make, counts nothing; a content change counts no skip.
func TestUpstreamCountsOfSourceUpdates(t *testing.T) {
	u := metrics.New(prometheus.NewRegistry(), false).Upstream
	h := sourcecache.ConfigMaps.CountEvents(u)
	cm := func(rv, v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "cfg", ResourceVersion: rv}, Data: map[string]string{"k": v}}
	}
	count := func() (received, skipped, reconciles float64) {
		return counterValue(u.EventsReceived.WithLabelValues(metrics.EventUpdate, "configmaps")),
			counterValue(u.Skipped.WithLabelValues(metrics.SkipNoDataChange)),
			counterValue(u.Reconciles.WithLabelValues(metrics.ResultSkipped))
	}
	for _, step := range []struct {
		name           string
		old, new       *corev1.ConfigMap
		received, skip float64
	}{
		{"resync", cm("1", "a"), cm("1", "a"), 0, 0},
		{"labels only", cm("1", "a"), cm("2", "a"), 1, 1},
		{"content", cm("2", "a"), cm("3", "b"), 2, 1},
		{"same again", cm("3", "b"), cm("4", "b"), 3, 2},
	} {
		h.OnUpdate(step.old, step.new)
		received, skipped, reconciles := count()
		if received != step.received || skipped != step.skip || reconciles != step.skip {
			t.Errorf("after %s: received %v, no_data_change %v, reconcile skipped %v; want %v, %v, %v",
				step.name, received, skipped, reconciles, step.received, step.skip, step.skip)
		}
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
