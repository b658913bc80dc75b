package loadtest

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// metricSample is one line of a Prometheus text exposition.
type metricSample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// parseExposition reads the samples of a Prometheus text exposition; lines it cannot read
// are skipped.
func parseExposition(text string) []metricSample {
	var out []metricSample
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s := metricSample{Labels: map[string]string{}}
		rest := line
		if i := strings.IndexAny(line, "{ "); i < 0 {
			continue
		} else {
			s.Name, rest = line[:i], line[i:]
		}
		if rest[0] == '{' {
			var ok bool
			if rest, ok = parseLabels(rest[1:], s.Labels); !ok {
				continue
			}
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.Value = v
		out = append(out, s)
	}
	return out
}

// parseLabels reads `a="x",b="y"}` into labels and returns what follows the brace.
func parseLabels(s string, labels map[string]string) (string, bool) {
	for {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			return "", false
		}
		if s[0] == '}' {
			return s[1:], true
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return "", false
		}
		name := strings.TrimSpace(s[:eq])
		var b strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
				continue
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return "", false
		}
		labels[name] = b.String()
		s = s[i+1:]
	}
}

// outcomeMetric counts this project's reconciles by kind and outcome; Scrape keeps it by
// outcome too (outcomeSeries).
const outcomeMetric = "reloader_workload_reconcile_total"

// outcomeSeries names the sum of outcomeMetric over kinds for one outcome.
func outcomeSeries(outcome string) string { return outcomeMetric + `{outcome="` + outcome + `"}` }

// Scrape is the figures the load test keeps of one /metrics scrape: every sample summed over
// its labels by name, histogram buckets by upper bound, rest_client_requests_total by HTTP
// method and code, and reloader_workload_reconcile_total by outcome as well.
type Scrape struct {
	Sums map[string]float64
	// Buckets: histogram name (without _bucket) -> upper bound -> cumulative count.
	Buckets map[string]map[float64]float64
	// Client: "METHOD CODE" -> requests, from client-go's rest_client_requests_total.
	Client map[string]float64
}

func newScrape(text string) Scrape {
	s := Scrape{Sums: map[string]float64{}, Buckets: map[string]map[float64]float64{}, Client: map[string]float64{}}
	for _, m := range parseExposition(text) {
		switch {
		case strings.HasSuffix(m.Name, "_bucket"):
			le, err := strconv.ParseFloat(m.Labels["le"], 64)
			if err != nil {
				continue
			}
			h := strings.TrimSuffix(m.Name, "_bucket")
			if s.Buckets[h] == nil {
				s.Buckets[h] = map[float64]float64{}
			}
			s.Buckets[h][le] += m.Value
			continue
		case m.Name == "rest_client_requests_total":
			s.Client[m.Labels["method"]+" "+m.Labels["code"]] += m.Value
		case m.Name == outcomeMetric && m.Labels["outcome"] != "":
			// What the reconciles came to (reloaded, waiting, unchanged, ...): where a build's
			// reconciles per rollout go.
			s.Sums[outcomeSeries(m.Labels["outcome"])] += m.Value
		case m.Labels["quantile"] != "":
			// Summaries: keep the maximum (quantile 1) under name{quantile="1"}.
			if m.Labels["quantile"] == "1" {
				s.Sums[m.Name+`{quantile="1"}`] = m.Value
			}
			continue
		}
		s.Sums[m.Name] += m.Value
	}
	return s
}

// add returns the sum of two scrapes (counters of two processes).
func (s Scrape) add(o Scrape) Scrape {
	out := Scrape{Sums: map[string]float64{}, Buckets: map[string]map[float64]float64{}, Client: map[string]float64{}}
	for _, x := range []Scrape{s, o} {
		for k, v := range x.Sums {
			out.Sums[k] += v
		}
		for k, v := range x.Client {
			out.Client[k] += v
		}
		for h, bs := range x.Buckets {
			if out.Buckets[h] == nil {
				out.Buckets[h] = map[float64]float64{}
			}
			for le, v := range bs {
				out.Buckets[h][le] += v
			}
		}
	}
	return out
}

// quantile estimates the q-quantile of a cumulative histogram, interpolating linearly inside
// the bucket as Prometheus' histogram_quantile does. ok is false for an empty histogram.
func quantile(buckets map[float64]float64, q float64) (float64, bool) {
	les := make([]float64, 0, len(buckets))
	for le := range buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 {
		return 0, false
	}
	total := buckets[les[len(les)-1]]
	if total == 0 {
		return 0, false
	}
	rank := q * total
	prevLE, prevCount := 0.0, 0.0
	for _, le := range les {
		c := buckets[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return prevLE, true // the highest finite bound, as histogram_quantile
			}
			if c == prevCount {
				return le, true
			}
			return prevLE + (le-prevLE)*(rank-prevCount)/(c-prevCount), true
		}
		prevLE, prevCount = le, c
	}
	return prevLE, true
}

// first returns the first of names the scrape has, and its value.
func (s Scrape) first(names ...string) (string, float64, bool) {
	for _, n := range names {
		if v, ok := s.Sums[n]; ok {
			return n, v, true
		}
	}
	return "", 0, false
}
