package shard

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// Two managers in one process (tests) make their metrics on the same registry: the second
// reuses the first's collectors, and what they show is the second's.
func TestMetricsMadeTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, _ := NewSpace(4)
	first, second := NewFilter(s, true), NewFilter(s, false)
	first.NewInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, nil)
	second.NewInformer(&toolscache.ListWatch{}, &corev1.Secret{}, 0, nil)
	NewMetrics(reg, first, ServerSide).Owned([]int{0, 1})
	NewMetrics(reg, second, ClientSide).Owned([]int{2})

	families, err := reg.Gather()
	testutil.Must(t, err)
	got := map[string][]*dto.Metric{}
	for _, f := range families {
		got[f.GetName()] = f.GetMetric()
	}
	if m := got["reloader_shards_owned"]; len(m) != 1 || m[0].GetGauge().GetValue() != 1 {
		t.Errorf("reloader_shards_owned: %v, want 1", m)
	}
	if m := got["reloader_shard_filtering"]; len(m) != 1 || m[0].GetLabel()[0].GetValue() != string(ClientSide) {
		t.Errorf("reloader_shard_filtering: %v, want mode %q alone", m, ClientSide)
	}
	if m := got["reloader_cached_objects"]; len(m) != 1 || m[0].GetLabel()[0].GetValue() != "Secret" {
		t.Errorf("reloader_cached_objects: %v, want the second filter's Secrets", m)
	}
}
