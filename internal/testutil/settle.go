package testutil

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// QuietFor is how long Settle wants to see nothing change: more than three coalescing
// windows at reloader's default (300 ms) and several round trips of a watch event, so a
// reload that was still on its way would have moved a counter within it.
const QuietFor = time.Second

// settleEvery is how often Settle observes.
const settleEvery = 150 * time.Millisecond

// Settle is the wait before a negative check ("nothing more happens"): it waits for a positive
// sign of quiescence instead of sleeping. observe returns a fingerprint of the activity it can
// see (counters, resourceVersions) or an error while something is visibly still in progress
// (work queued, the change under test not yet heard). Settle returns once observe has
// returned the same fingerprint, without error, on every call for QuietFor (and at least
// three calls), and fails the test when that has not happened within Timeout.
//
// Quiet for a span is the signal, so the fingerprint must include whatever would move if the
// change under test were still being acted on: for reloader, its own counters of events
// heard, work queued and reconciles done (QuietMetrics); for an in-process reloader the same
// series from its registry.
func Settle(t testing.TB, what string, observe func() (string, error)) {
	t.Helper()
	SettleFor(t, QuietFor, what, observe)
}

// SettleFor is Settle with the quiet span given, for reloaders whose coalescing window or
// retry delays are longer than the default's.
func SettleFor(t testing.TB, quiet time.Duration, what string, observe func() (string, error)) {
	t.Helper()
	if err := settle(quiet, Timeout(), observe); err != nil {
		t.Fatalf("waiting for %s to settle: %v", what, err)
	}
}

func settle(quiet, timeout time.Duration, observe func() (string, error)) error {
	deadline := time.Now().Add(timeout)
	var (
		last    string
		since   time.Time
		seen    int
		lastErr error
	)
	for {
		fp, err := observe()
		now := time.Now()
		switch {
		case err != nil:
			seen, lastErr = 0, err
		case seen == 0 || fp != last:
			last, since, seen, lastErr = fp, now, 1, nil
		default:
			seen++
			if seen >= 3 && now.Sub(since) >= quiet {
				return nil
			}
		}
		if now.After(deadline) {
			if lastErr != nil {
				return lastErr
			}
			return fmt.Errorf("still changing after %s (last seen: %s)", timeout, last)
		}
		time.Sleep(settleEvery)
	}
}

// Metrics is one scrape of a Prometheus text exposition, such as reloader's /metrics: each
// series, written as name{labels}, with its value.
type Metrics map[string]float64

// ParseMetrics reads the text exposition format's sample lines; comments and lines it cannot
// read are skipped.
func ParseMetrics(text string) Metrics {
	m := Metrics{}
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the series; label values may hold spaces, so cut after the '}'.
		series, rest := line, ""
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			series, rest = line[:i+1], line[i+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			series, rest = line[:i], line[i:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		m[series] = v
	}
	return m
}

// ScrapeMetrics fetches and parses url (http://host:port/metrics).
func ScrapeMetrics(url string) (Metrics, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseMetrics(string(body)), nil
}

// Sum adds up every series of the metric name (all label values).
func (m Metrics) Sum(name string) float64 {
	var s float64
	for series, v := range m {
		if metricName(series) == name {
			s += v
		}
	}
	return s
}

func metricName(series string) string {
	if i := strings.IndexByte(series, '{'); i >= 0 {
		return series[:i]
	}
	return series
}

// activity is what moves whenever reloader hears a change or acts on one: watch events
// received, items queued and retried, reconciles and their results, writes, reloads.
var activity = []string{
	"reloader_events_received_total",
	"reloader_workqueue_adds_total",
	"reloader_retries_total",
	"reloader_reconcile_total",
	"reloader_workload_reconcile_total",
	"reloader_action_total",
	"reloader_reloads_total",
	"reloader_errors_total",
	"controller_runtime_reconcile_total",
}

// busy is what is above zero while reloader has work in hand: items ready in a queue, a
// worker reconciling, a reload waiting (coalescing, a hold, pacing).
var busy = []string{
	"reloader_workqueue_depth",
	"workqueue_depth",
	"controller_runtime_active_workers",
	"reloader_reloads_waiting",
}

// Busy says what work reloader has in hand, or nil when it has none.
func (m Metrics) Busy() error {
	var in []string
	for series, v := range m {
		if v > 0 && slices.Contains(busy, metricName(series)) {
			in = append(in, fmt.Sprintf("%s %g", series, v))
		}
	}
	if len(in) == 0 {
		return nil
	}
	slices.Sort(in)
	return fmt.Errorf("busy: %s", strings.Join(in, ", "))
}

// Activity is a fingerprint of reloader's activity counters, and of the metrics named in
// also: equal in two scrapes when reloader heard nothing and did nothing in between.
func (m Metrics) Activity(also ...string) string {
	var out []string
	for series, v := range m {
		if name := metricName(series); slices.Contains(activity, name) || slices.Contains(also, name) {
			out = append(out, fmt.Sprintf("%s %g", series, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// QuietMetrics observes the reloaders serving metrics at urls, for Settle: an error while
// any is busy or cannot be read, else the fingerprint of all their activity counters. After
// a positive wait (the reload under test seen), Settle(t, what, QuietMetrics(url)) is the
// "room for a late duplicate": it returns once no reloader has anything queued, running or
// waiting, and none of their counters has moved for QuietFor.
func QuietMetrics(urls ...string) func() (string, error) {
	scrapes := make([]func() (Metrics, error), len(urls))
	for i, u := range urls {
		scrapes[i] = func() (Metrics, error) {
			m, err := ScrapeMetrics(u)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", u, err)
			}
			return m, nil
		}
	}
	return Quiet(scrapes...)
}

// Quiet is QuietMetrics over any source of reloader's metrics, such as the registry of the
// reloaders running in the test's own process (clustertest.InProcessMetrics).
func Quiet(scrapes ...func() (Metrics, error)) func() (string, error) {
	return quiet(nil, scrapes)
}

// QuietRequests is Quiet that also waits for reloader's API requests to stop
// (rest_client_requests_total): for work done in the background, outside any queue, such
// as Events written by the broadcaster. Leader election renews a Lease every retry period,
// so it suits reloaders whose period is longer than QuietFor.
func QuietRequests(scrapes ...func() (Metrics, error)) func() (string, error) {
	return quiet([]string{"rest_client_requests_total"}, scrapes)
}

func quiet(also []string, scrapes []func() (Metrics, error)) func() (string, error) {
	return func() (string, error) {
		var fps []string
		for _, scrape := range scrapes {
			m, err := scrape()
			if err != nil {
				return "", err
			}
			if _, ok := m["reloader_workqueue_depth"]; !ok {
				return "", errors.New("no reloader_workqueue_depth: not reloader's metrics")
			}
			if err := m.Busy(); err != nil {
				return "", err
			}
			fps = append(fps, m.Activity(also...))
		}
		return strings.Join(fps, "\n--\n"), nil
	}
}

// Heard returns an error until the metric name (all series) has gone above its value in
// before: the positive sign that reloader received the change a negative check is about,
// before Settle waits for it to be done with it.
func Heard(before, now Metrics, name string) error {
	if now.Sum(name) > before.Sum(name) {
		return nil
	}
	return errors.New(name + " has not moved: the change is not heard yet")
}
