package shard

import (
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reloader-operator/reloader/internal/metrics"
)

// Metrics shows what this replica owns and holds.
type Metrics struct {
	owned prometheus.Gauge
}

// NewMetrics registers reloader_shards_owned, reloader_shard_filtering{mode} and
// reloader_cached_objects{kind} (read from the informers' stores at each scrape) on reg.
// Made again on the same registry (several managers in one test process), it reuses the
// collectors registered first, and the cache counted is the last filter's.
func NewMetrics(reg prometheus.Registerer, f *Filter, mode Mode) *Metrics {
	m := &Metrics{
		owned: metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "reloader_shards_owned",
			Help: "Shards of the namespaces (--shards) this replica holds the Lease of."})),
	}
	modes := metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "reloader_shard_filtering",
		Help: "1 for how this replica's cache receives only its shards: server (the API server's shardSelector) or client (filtered on arrival)."}, []string{"mode"}))
	modes.Reset()
	modes.WithLabelValues(string(mode)).Set(1)
	metrics.Register(reg, &cachedObjects{desc: prometheus.NewDesc("reloader_cached_objects",
		"Objects held in this replica's cache, by kind.", []string{"kind"}, nil)}).filter.Store(f)
	return m
}

// Owned sets the number of shards held.
func (m *Metrics) Owned(owned []int) { m.owned.Set(float64(len(owned))) }

// cachedObjects counts the objects of a filter's informers at each scrape.
type cachedObjects struct {
	desc   *prometheus.Desc
	filter atomic.Pointer[Filter]
}

// Describe implements prometheus.Collector.
func (c *cachedObjects) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *cachedObjects) Collect(ch chan<- prometheus.Metric) {
	f := c.filter.Load()
	if f == nil {
		return
	}
	counts := f.Cached()
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[k]), k)
	}
}
