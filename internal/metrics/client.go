package metrics

import (
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// UpstreamRESTLatencyBuckets are the buckets of upstream's rest_client_request_duration_seconds,
// so that a dashboard's le="…" selectors built on upstream find the same bounds.
var UpstreamRESTLatencyBuckets = []float64{0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30}

// RegisterClientLatency exposes client-go's request latency as upstream does,
// rest_client_request_duration_seconds{verb,host}, on controller-runtime's registry (where
// rest_client_requests_total already is). Both labels are bounded: a handful of HTTP verbs,
// and the API server's host. It registers once per process; later calls do nothing.
func RegisterClientLatency() {
	crmetrics.RegisterRESTClientMetricsWithOptions(crmetrics.RESTClientMetricsOptions{DurationBuckets: UpstreamRESTLatencyBuckets},
		crmetrics.MetricRequestLatency)
}
