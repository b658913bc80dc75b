package loadtest

import (
	"strings"
	"time"
)

// reconcileRate is the reconcile rate over w.
func reconcileRate(samples []Sample, w window) float64 {
	return rateOver(samples, w, reconcileCounter)
}

func reconcileCounter(s Sample) (float64, bool) {
	if s.Metrics == nil {
		return 0, false
	}
	_, v, ok := s.Metrics.first(reconcileMetrics...)
	return v, ok
}

// returnedAt is the seconds from settled to the first span of width after it over which the
// reconcile rate was back at base (plus 0.2/s and 10 %, for the odd periodic reconcile); nil
// if there is none yet.
func returnedAt(samples []Sample, settled time.Time, base float64, width time.Duration) *float64 {
	for _, s := range samples {
		if s.At.Before(settled) || s.Metrics == nil {
			continue
		}
		w := window{from: s.At, to: s.At.Add(width)}
		if samples[len(samples)-1].At.Before(w.to) {
			return nil
		}
		if reconcileRate(samples, w) <= base*1.1+0.2 {
			sec := s.At.Sub(settled).Seconds()
			return &sec
		}
	}
	return nil
}

// throughput is the rollouts per second from the first write to the last rollout, and the
// seconds from the end of the load to that rollout.
func throughput(writes, changes map[string][]time.Time, loadEnd time.Time) (perSecond, settle float64) {
	var first, last time.Time
	n := 0
	for w, ws := range writes {
		for _, t := range ws {
			if first.IsZero() || t.Before(first) {
				first = t
			}
		}
		for _, t := range changes[w] {
			n++
			last = maxTime(last, t)
		}
	}
	if n == 0 || first.IsZero() {
		return 0, 0
	}
	if s := last.Sub(first).Seconds(); s > 0 {
		perSecond = float64(n) / s
	}
	return perSecond, max(0, last.Sub(loadEnd).Seconds())
}

// clientAPI counts requests from the controller's client metrics ("METHOD CODE" -> count):
// HTTP methods rather than verbs, so LISTs, GETs and WATCHes are one figure.
func clientAPI(byMethodCode map[string]float64) API {
	a := API{Source: "client metrics", ByVerb: map[string]int{}, ByCode: map[string]int{}}
	for k, v := range byMethodCode {
		method, code, _ := strings.Cut(k, " ")
		n := int(v)
		a.Total += n
		a.ByVerb[method] += n
		a.ByCode[code] += n
		switch method {
		case "POST", "PUT", "PATCH", "DELETE":
			a.Writes += n
		}
		if code == "409" {
			a.Conflicts += n
		}
	}
	return a
}
