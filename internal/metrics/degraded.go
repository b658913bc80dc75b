package metrics

import "github.com/prometheus/client_golang/prometheus"

// NewDegraded registers reloader_degraded{kind}: 1 for a workload kind that reloader's RBAC
// lets it list and get but not watch, so it lists the namespace's workloads of that kind on
// each source change (as upstream does); 0 for a kind watched. Alert on it being 1.
func NewDegraded(reg prometheus.Registerer) *prometheus.GaugeVec {
	return Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "reloader_degraded",
		Help: "1 for a workload kind read without watch (degraded mode: listed on each source change), 0 for a kind watched.",
	}, []string{"kind"}))
}
