package shard

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics shows what this replica owns and holds.
type Metrics struct {
	owned  prometheus.Gauge
	mode   *prometheus.GaugeVec
	cached *prometheus.Desc
	filter *Filter
}

// NewMetrics registers reloader_shards_owned, reloader_shard_filtering{mode} and
// reloader_cached_objects{kind} (read from the informers' stores at each scrape).
func NewMetrics(reg prometheus.Registerer, f *Filter, mode Mode) (*Metrics, error) {
	m := &Metrics{
		owned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "reloader_shards_owned",
			Help: "Shards of the namespaces (--shards) this replica holds the Lease of."}),
		mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "reloader_shard_filtering",
			Help: "1 for how this replica's cache receives only its shards: server (the API server's shardSelector) or client (filtered on arrival)."}, []string{"mode"}),
		cached: prometheus.NewDesc("reloader_cached_objects", "Objects held in this replica's cache, by kind.", []string{"kind"}, nil),
		filter: f,
	}
	m.mode.WithLabelValues(string(mode)).Set(1)
	for _, c := range []prometheus.Collector{m.owned, m.mode, m} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Owned sets the number of shards held.
func (m *Metrics) Owned(owned []int) { m.owned.Set(float64(len(owned))) }

// Describe implements prometheus.Collector for the cached objects.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.cached }

// Collect implements prometheus.Collector for the cached objects.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	counts := m.filter.Cached()
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		ch <- prometheus.MustNewConstMetric(m.cached, prometheus.GaugeValue, float64(counts[k]), k)
	}
}
