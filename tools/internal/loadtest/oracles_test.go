package loadtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testenv/audit"
)

// template is a pod template as a build leaves it: env vars with a hash per source (ours and
// upstream's env-vars strategy), and annotations (a restart's time, upstream's JSON record).
func templateJSON(env map[string]string, annotations map[string]string) string {
	var e []string
	for k, v := range env {
		e = append(e, fmt.Sprintf(`{"name":%q,"value":%q}`, k, v))
	}
	var a []string
	for k, v := range annotations {
		a = append(a, fmt.Sprintf(`%q:%q`, k, v))
	}
	return `{"metadata":{"annotations":{` + strings.Join(a, ",") + `}},"spec":{"containers":[{"name":"app","env":[` + strings.Join(e, ",") + `]}]}}`
}

// The observer's signatures: a template that differs only in when it was written (a restart's
// RFC 3339 time, a JSON record's Unix time) signs alike; one with another hash does not.
func TestTemplateSignatureSeesContentNotTime(t *testing.T) {
	h1 := templateJSON(map[string]string{"STAKATER_APP_CONFIGMAP": "3f9a0c2e1b7d"}, nil)
	h2 := templateJSON(map[string]string{"STAKATER_APP_CONFIGMAP": "77be01d4aa90"}, nil)
	if TemplateSignature(h1) == TemplateSignature(h2) {
		t.Error("templates with two hashes sign alike")
	}
	r1 := templateJSON(nil, map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-28T01:02:03Z"})
	r2 := templateJSON(nil, map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-28T01:09:59.123+01:00"})
	if TemplateSignature(r1) != TemplateSignature(r2) {
		t.Error("two restarts' times sign apart")
	}
	rec := func(hash string, at int64) string {
		return templateJSON(nil, map[string]string{"reloader.stakater.com/last-reloaded-from": fmt.Sprintf(`{"hash":%q,"observedAt":%d}`, hash, at)})
	}
	if TemplateSignature(rec("3f9a0c2e1b7d", 1764291723)) != TemplateSignature(rec("3f9a0c2e1b7d", 1764291799)) {
		t.Error("one content recorded at two times signs apart")
	}
	if TemplateSignature(rec("3f9a0c2e1b7d", 1764291723)) == TemplateSignature(rec("77be01d4aa90", 1764291723)) {
		t.Error("two contents recorded at one time sign alike")
	}

	// The observer: the first sight is no change; each change is signed.
	o := newObserver()
	t0 := time.Now()
	o.saw("Deployment/ns/w", h1, t0)
	o.saw("Deployment/ns/w", h1, t0.Add(time.Second)) // a status update: same template
	o.saw("Deployment/ns/w", h2, t0.Add(2*time.Second))
	first, after := o.Signatures()
	if first["Deployment/ns/w"] != TemplateSignature(h1) || len(after["Deployment/ns/w"]) != 1 || after["Deployment/ns/w"][0] != TemplateSignature(h2) ||
		len(o.Changes()["Deployment/ns/w"]) != 1 {
		t.Errorf("first %v, after %v, changes %v", first, after, o.Changes())
	}
}

// The judge's content checks, fed the timelines the timing checks alone let pass.
func TestJudgeChecksContent(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	sig := func(s string) string {
		return TemplateSignature(templateJSON(map[string]string{"STAKATER_APP_CONFIGMAP": s}, nil))
	}
	restart := func(hash, at string) string {
		return TemplateSignature(templateJSON(map[string]string{"STAKATER_APP_CONFIGMAP": hash}, map[string]string{"kubectl.kubernetes.io/restartedAt": at}))
	}
	type timeline struct {
		writes   []ContentWrite
		changes  []time.Time
		first    string
		after    []string
		missed   int
		dups     int
		describe string
	}
	w := func(ms, version int) ContentWrite {
		return ContentWrite{Start: at(ms), Source: "ConfigMap/ns/app", Version: version}
	}
	cases := []timeline{
		{describe: "rolls once per write, each onto its content", writes: []ContentWrite{w(0, 1), w(1000, 2)},
			changes: []time.Time{at(100), at(1100)}, first: sig(""), after: []string{sig("h1"), sig("h2")}},
		{describe: "rolls once per write, but the last rollout goes back to the first write's content: missed",
			writes: []ContentWrite{w(0, 1), w(1000, 2), w(2000, 3)}, changes: []time.Time{at(100), at(1100), at(2100)}, first: sig(""),
			after: []string{sig("h1"), sig("h2"), sig("h1")}, missed: 1},
		{describe: "the second rollout repeats the first's content after the last write: missed and a duplicate",
			writes: []ContentWrite{w(0, 1), w(1000, 2)}, changes: []time.Time{at(100), at(1100)}, first: sig(""),
			after: []string{sig("h1"), sig("h1")}, missed: 1, dups: 1},
		{describe: "ends on the template it had before any write: missed",
			writes: []ContentWrite{w(0, 1)}, changes: []time.Time{at(100), at(200)}, first: sig(""),
			after: []string{sig("h1"), sig("")}, missed: 1, dups: 1},
		{describe: "two rollouts for one write, the second only a new time: a duplicate, though rollouts do not outnumber writes",
			writes: []ContentWrite{w(0, 1), w(50, 2)}, changes: []time.Time{at(400), at(900)}, first: sig(""),
			after: []string{restart("h2", "2026-11-28T01:00:01Z"), restart("h2", "2026-11-28T01:00:02Z")}, dups: 1},
		{describe: "A, B, A: the right final template is one seen before, not judged stale",
			writes: []ContentWrite{w(0, 1), w(1000, 2), w(2000, 1)}, changes: []time.Time{at(100), at(1100), at(2100)}, first: sig(""),
			after: []string{sig("h1"), sig("h2"), sig("h1")}},
		{describe: "a restart with nothing new between two content rollouts: a duplicate",
			writes: []ContentWrite{w(0, 1), w(1000, 2)}, changes: []time.Time{at(100), at(500), at(1100)}, first: sig(""),
			after: []string{restart("h1", "2026-11-28T00:00:01Z"), restart("h1", "2026-11-28T00:00:02Z"), sig("h2")}, dups: 1},
	}
	for _, c := range cases {
		var r Result
		writes := map[string][]time.Time{}
		for _, cw := range c.writes {
			writes["w"] = append(writes["w"], cw.Start)
		}
		trace := &ContentTrace{Writes: map[string][]ContentWrite{"w": c.writes}, First: map[string]string{"w": c.first}, After: map[string][]string{"w": c.after}}
		judge(&r, writes, map[string]bool{"w": true}, map[string][]time.Time{"w": c.changes}, trace)
		if r.Missed != c.missed || r.Duplicates != c.dups {
			t.Errorf("%s: missed %d, duplicates %d; want %d, %d (%v)", c.describe, r.Missed, r.Duplicates, c.missed, c.dups, r.Examples)
		}
		// Timing alone (no trace) saw none of them missed.
		var timing Result
		judge(&timing, writes, map[string]bool{"w": true}, map[string][]time.Time{"w": c.changes}, nil)
		if timing.Missed != 0 {
			t.Errorf("%s: timing alone saw it missed", c.describe)
		}
	}
}

// A side far worse than one that missed reloads is judged, not passed: per rollout for
// totals, as measured for memory.
func TestGatesStayOnAgainstASideThatMissed(t *testing.T) {
	rss := func(v float64) *float64 { return &v }
	missed := Result{Scenario: "S3", Side: "old", Reloads: 90, ExpectedMin: 100, ExpectedMax: 100, Missed: 10,
		LatencyFromLastWrite: Latency{P50: 100, P95: 200, P99: 300}, API: &API{Total: 200, Writes: 100, Lists: 5},
		PeakRSSMiB: 40, CPUSeconds: 1, Runtime: Runtime{Errors: rss(0), ReconcileReturnSeconds: rss(2)}}
	worse := missed
	worse.Side, worse.Missed, worse.Reloads = "new", 0, 100
	worse.API = &API{Total: 2_000_000, Writes: 1_000_000, Lists: 500}
	worse.CPUSeconds, worse.PeakRSSMiB = 100, 4000
	rep := Build([]Result{missed, worse}, DefaultGates())
	got := rep.Sections[0].NewVerdict
	for _, want := range []string{"API requests", "API writes", "LISTs", "CPU seconds", "peak RSS"} {
		if !strings.Contains(got.String(), want) {
			t.Errorf("new side 100x worse against a side that missed: %v, want a FAIL on %s", got, want)
		}
	}
	if got.Level() != "FAIL" || rep.Sections[0].OldVerdict.String() != "FAIL (missed 10)" {
		t.Errorf("new %v, old %v", got, rep.Sections[0].OldVerdict)
	}
	// As good per rollout as the side that missed: it passes.
	same := missed
	same.Side, same.Missed, same.Reloads = "new", 0, 100
	same.API = &API{Total: 222, Writes: 111, Lists: 5}
	if rep := Build([]Result{missed, same}, DefaultGates()); rep.Sections[0].NewVerdict.Level() != "PASS" {
		t.Errorf("a side as good per rollout: %v", rep.Sections[0].NewVerdict)
	}
}

// Watch lists (sendInitialEvents=true) count as LISTs in the gate, and apart in the report.
func TestWatchListsCountAsLists(t *testing.T) {
	ev := func(verb, uri string) audit.Event {
		e := audit.Event{Verb: verb, RequestURI: uri}
		e.ResponseStatus.Code = 200
		return e
	}
	a := CountAPI([]audit.Event{
		ev("list", "/api/v1/configmaps?limit=500"),
		ev("watch", "/api/v1/configmaps?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true"),
		ev("watch", "/api/v1/configmaps?allowWatchBookmarks=true&resourceVersion=12&watch=true"),
		ev("get", "/api/v1/namespaces/a/configmaps/x"),
	})
	if a.Lists != 1 || a.WatchLists != 1 || a.ListEquivalents() != 2 {
		t.Errorf("lists %d, watch lists %d, equivalents %d; want 1, 1, 2", a.Lists, a.WatchLists, a.ListEquivalents())
	}
	// A relist by watch list after start-up fails the LIST gate as a LIST would.
	base := Result{Scenario: "S1", Side: "old", API: &API{Total: 100, Lists: 2}, Runtime: Runtime{ReconcileReturnSeconds: new(float64)}}
	relist := base
	relist.Side = "new"
	relist.API = &API{Total: 100, Lists: 2, WatchLists: 40}
	if v := Build([]Result{base, relist}, DefaultGates()).Sections[0].NewVerdict.String(); !strings.Contains(v, "LISTs 42") {
		t.Errorf("40 watch lists: %s, want a FAIL on LISTs 42", v)
	}
}

// The guardrail scenarios' gates fail on the case each names: S18 with no Event naming both
// writers; S19 with the bad content past the canary, or the fix rolled twice or not at all.
func TestGuardrailGatesFail(t *testing.T) {
	side := func(id, name string, checks ...CheckFigure) Result {
		return Result{Scenario: id, Side: name, Checks: checks, Runtime: Runtime{ReconcileReturnSeconds: new(float64)}}
	}
	verdict := func(r Result) string {
		other := r
		other.Side = "old"
		return Build([]Result{other, r}, DefaultGates()).Sections[0].NewVerdict.String()
	}
	naming := func(v float64) CheckFigure {
		return CheckFigure{Name: "SourceQuarantined Events naming both writers", Value: v, Min: limit(1)}
	}
	if v := verdict(side("S18", "new", naming(0))); !strings.HasPrefix(v, "FAIL (SourceQuarantined Events naming both writers 0") {
		t.Errorf("S18 without an Event naming both writers: %s", v)
	}
	if v := verdict(side("S18", "new", naming(1))); v != "PASS" {
		t.Errorf("S18 with one: %s", v)
	}
	s19 := func(spread, most, fewest float64) Result {
		return side("S19", "new",
			CheckFigure{Name: "failure spread: Deployments rolled onto the bad content", Value: spread, Max: limit(spreadCanary)},
			CheckFigure{Name: "rollouts per Deployment onto the fixed content (most)", Value: most, Max: limit(1)},
			CheckFigure{Name: "rollouts per Deployment onto the fixed content (fewest)", Value: fewest, Min: limit(1)})
	}
	for _, c := range []struct {
		r    Result
		want string
	}{
		{s19(1, 1, 1), "PASS"},
		{s19(40, 1, 1), "FAIL (failure spread: Deployments rolled onto the bad content 40)"},
		{s19(1, 2, 1), "FAIL (rollouts per Deployment onto the fixed content (most) 2)"},
		{s19(1, 1, 0), "FAIL (rollouts per Deployment onto the fixed content (fewest) 0)"},
	} {
		if v := verdict(c.r); v != c.want {
			t.Errorf("S19 %v: %s, want %s", c.r.Checks, v, c.want)
		}
	}
}
