package loadtest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// S18 and S19 at the design's size: the shapes the tests name, the settings each
// build reads from the objects, and the breaker's flag for the builds that have it.
func TestGuardrailScenarioShapes(t *testing.T) {
	s18 := Scenarios["S18"].Build(Params{Scale: 1})
	sec := s18.Sources[0]
	if len(s18.Sources) != 1 || sec.Kind != Secret || len(s18.Workloads) != 5 || sec.Annotations["reloader.dev/flap-quiet"] != flapQuiet.String() {
		t.Errorf("S18: sources %+v, %d workloads", s18.Sources, len(s18.Workloads))
	}
	if !slices.Contains(s18.OwnArgs, "--flap-max-changes=8") || len(s18.Args) != 0 || s18.Holds == "" || !slices.Equal(s18.Checks, []string{CheckFlap}) {
		t.Errorf("S18: own args %v, args %v, holds %q, checks %v", s18.OwnArgs, s18.Args, s18.Holds, s18.Checks)
	}
	if got := sourceObject(sec, 0).GetAnnotations()["reloader.dev/flap-window"]; got != "10m" {
		t.Errorf("S18's Secret created with flap-window %q", got)
	}
	s19 := Scenarios["S19"].Build(Params{Scale: 1})
	cm := s19.Sources[0]
	if len(s19.Sources) != 1 || cm.Kind != ConfigMap || len(s19.Workloads) != 40 || sourceObject(cm, 0).GetAnnotations()["reloader.dev/waves"] != "true" {
		t.Errorf("S19: sources %+v, %d workloads", s19.Sources, len(s19.Workloads))
	}
	for _, w := range s19.Workloads {
		d, ok := workloadObject(w).(*appsv1.Deployment)
		if !ok || d.Spec.ProgressDeadlineSeconds == nil || *d.Spec.ProgressDeadlineSeconds != spreadDeadline || w.Refs[0].Source.Key() != cm.Key() {
			t.Fatalf("S19: %s is not a Deployment of %s with a %d s progress deadline", w.Key(), cm.Key(), spreadDeadline)
		}
	}
	if !slices.Equal(s19.Checks, []string{CheckSpread}) || s19.Holds == "" || len(s19.OwnArgs) != 0 {
		t.Errorf("S19: checks %v, holds %q, own args %v", s19.Checks, s19.Holds, s19.OwnArgs)
	}
}

// The guardrail checks count each phase's rollouts from the observer's changes and read what
// the API server stores (Events, Deployments' status); a fake client stores the same.
func TestGuardrailFigures(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	at := func(s ...int) []time.Time {
		var out []time.Time
		for _, x := range s {
			out = append(out, t0.Add(time.Duration(x)*time.Second))
		}
		return out
	}
	figures := func(fs []CheckFigure) map[string]float64 {
		out := map[string]float64{}
		for _, f := range fs {
			out[f.Name] = f.Value
		}
		return out
	}
	a, b := Workload{Kind: Deployment, Namespace: "ns", Name: "a"}, Workload{Kind: Deployment, Namespace: "ns", Name: "b"}
	specs := map[string]Workload{a.Key(): a, b.Key(): b}
	tracked := map[string]bool{a.Key(): true, b.Key(): true}

	// S18: the flap from 0 s to 60 s (its grace to 65 s), the single change at 100 s.
	flapIn := checkInput{tracked: tracked, specs: specs,
		marks:   map[string]time.Time{markFlapStart: t0, markFlapOver: t0.Add(60 * time.Second), markSingle: t0.Add(100 * time.Second)},
		changes: map[string][]time.Time{a.Key(): at(1, 7, 13, 19, 64, 95, 101), b.Key(): at(2, 8, 96, 102)},
		samples: []Sample{{Metrics: &Scrape{Sums: map[string]float64{"reloader_quarantined_sources": 0}}}, {}, {Metrics: &Scrape{Sums: map[string]float64{"reloader_quarantined_sources": 1}}}}}
	event := func(name, reason, note string) client.Object {
		return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, EventTime: metav1.NewMicroTime(t0),
			Reason: reason, Note: note, Action: "Reload", ReportingController: "reloader", ReportingInstance: "r", Type: corev1.EventTypeWarning}
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		event("e1", "SourceQuarantined", "written by field managers "+flapWriterA+" (Update at ...), "+flapWriterB+" (Update at ...) (reported by the API server)"),
		event("e2", "SourceQuarantined", "written by field managers "+flapWriterA+" (Update at ...) (reported by the API server)"),
		event("e3", "Reloaded", flapWriterA+" "+flapWriterB)).Build()
	got, err := runChecks(context.Background(), cl, []string{CheckFlap}, flapIn)
	testutil.Must(t, err)
	want := map[string]float64{
		"rollouts per workload while two writers flapped its Secret (most)": 5, // a: 1, 7, 13, 19, 64
		"rollouts per workload once the Secret was quiet (most)":            1,
		"rollouts per workload on one later change (most)":                  1,
		"reloader_quarantined_sources, highest":                             1,
		"SourceQuarantined Events":                                          2,
		"SourceQuarantined Events naming both writers":                      1,
	}
	if f := figures(got); len(f) != len(want) {
		t.Errorf("S18 figures %v, want %v", f, want)
	} else {
		for k, v := range want {
			if f[k] != v {
				t.Errorf("S18 %s: %v, want %v", k, f[k], v)
			}
		}
	}
	if got[0].Max == nil || *got[0].Max != flapHandful || !got[0].Summary {
		t.Errorf("S18's flap figure is not gated at %d and quoted in the summary: %+v", flapHandful, got[0])
	}
	// A build without the gauge shows no figure for it.
	flapIn.samples = nil
	got, err = runChecks(context.Background(), cl, []string{CheckFlap}, flapIn)
	testutil.Must(t, err)
	if _, ok := figures(got)["reloader_quarantined_sources, highest"]; ok {
		t.Error("a gauge no sample had is shown")
	}
	if _, err := runChecks(context.Background(), cl, []string{CheckFlap}, checkInput{tracked: tracked, specs: specs}); err == nil {
		t.Error("S18's checks ran without the phases marked")
	}

	// S19: the bad content at 0 s, the fix at 30 s; a rolled onto the bad content and once
	// onto the fix, b twice onto the fix only; b's rollout is not complete.
	deployment := func(w Workload, complete bool) client.Object {
		d := workloadObject(w).(*appsv1.Deployment)
		d.Generation = 2
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}
		if !complete {
			d.Status.Replicas, d.Status.AvailableReplicas = 2, 1
		}
		return d
	}
	cl = fake.NewClientBuilder().WithScheme(scheme).WithObjects(deployment(a, true), deployment(b, false),
		event("s1", "RolloutStalled", "rollout of Deployment a stalled"), event("s2", "SourceQuarantined", "")).WithStatusSubresource(&appsv1.Deployment{}).Build()
	spreadIn := checkInput{tracked: tracked, specs: specs, marks: map[string]time.Time{markBad: t0, markFix: t0.Add(30 * time.Second)},
		changes: map[string][]time.Time{a.Key(): at(1, 31), b.Key(): at(31, 33)}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // b never completes: the wait ends with ctx
	defer cancel()
	got, err = runChecks(ctx, cl, []string{CheckSpread}, spreadIn)
	testutil.Must(t, err)
	want = map[string]float64{
		"failure spread: Deployments rolled onto the bad content": 1,
		"rollouts per Deployment onto the fixed content (most)":   2,
		"rollouts per Deployment onto the fixed content (fewest)": 1,
		"Deployments not complete on the fixed content":           1,
		"RolloutStalled Events":                                   1,
	}
	f := figures(got)
	for k, v := range want {
		if f[k] != v {
			t.Errorf("S19 %s: %v, want %v", k, f[k], v)
		}
	}
}

// The guardrail figures are quoted in the summary, each side's own figure beside the other's
// with its gate's verdict, drawn in the scenario's chart; a scenario whose build may hold
// reloads on purpose has its latencies shown, not gated.
func TestGuardrailReport(t *testing.T) {
	flapped := func(side string, rollouts float64, slowMs float64) Result {
		return Result{Scenario: "S18", Title: "flapping Secret", Side: side, Reloads: int(rollouts) * 5, ExpectedMin: 5, ExpectedMax: 155,
			Holds: "the flap breaker holds reloads", LatencyFromLastWrite: summarize([]float64{slowMs}), API: &API{Total: 100, Writes: 50}, PeakRSSMiB: 40,
			Checks: []CheckFigure{{Name: "rollouts per workload while two writers flapped its Secret (most)", Value: rollouts, Max: limit(flapHandful), Summary: true},
				{Name: "SourceQuarantined Events", Value: 0}}}
	}
	old, nu := flapped("old", 30, 900), flapped("new", 3, 45000)
	nu.Checks = append(nu.Checks, CheckFigure{Name: "reloader_quarantined_sources, highest", Value: 1, Summary: true})
	rep := Build([]Result{old, nu}, DefaultGates())
	s := rep.Sections[0]
	if !s.NewVerdict.Pass || s.OldVerdict.Pass || !slices.Contains(s.OldVerdict.Failed, "rollouts per workload while two writers flapped its Secret (most) 30") {
		t.Errorf("verdicts: new %v, old %v (the old build's 30 rollouts over the gate of %d)", s.NewVerdict, s.OldVerdict, flapHandful)
	}
	for _, r := range s.Rows {
		if strings.HasPrefix(r.Metric, "latency") && strings.Contains(r.Metric, "last write") && (r.Expected != "not gated" || r.NewVerdict != "") {
			t.Errorf("%s: gate %q, new %q: held reloads are slow by design", r.Metric, r.Expected, r.NewVerdict)
		}
	}
	sum := rep.Summary()[0]
	if len(sum.Guards) != 2 || sum.Guards[0].Sides() != "old 30 FAIL, new 3" || sum.Guards[1].Sides() != "old -, new 1" {
		t.Errorf("summary guards %+v", sum.Guards)
	}
	var text, md, page strings.Builder
	rep.Text(&text)
	rep.Markdown(&md)
	rep.HTML(&page)
	for _, line := range []string{"S18 rollouts (template changes, all workloads): old 150, new 15; API writes: old 50, new 50",
		"S18 rollouts per workload while two writers flapped its Secret (most): old 30 FAIL, new 3"} {
		for name, out := range map[string]string{"text": text.String(), "Markdown": md.String(), "HTML": page.String()} {
			if !strings.Contains(out, line) {
				t.Errorf("%s report does not quote %q:\n%s", name, line, out)
			}
		}
	}
	// The first screen: the guardrails follow the summary table, before the builds.
	if i, j := strings.Index(text.String(), "Guardrails"), strings.Index(text.String(), "\nS18  flapping"); i < 0 || i > j {
		t.Errorf("guardrails not on the summary screen:\n%s", text.String())
	}
	if !strings.Contains(page.String(), ">check: rollouts per workload while two writers flapped its Secret (most)</text>") {
		t.Error("the guardrail figure is not drawn in the scenario's chart")
	}
	// Other scenarios keep their latency gates and have no guardrail lines.
	plain := Build([]Result{{Scenario: "S1", Side: "old", LatencyFromLastWrite: summarize([]float64{100})}, {Scenario: "S1", Side: "new", LatencyFromLastWrite: summarize([]float64{9000})}}, DefaultGates())
	if plain.Sections[0].NewVerdict.Pass || len(plain.guardLines()) != 0 {
		t.Errorf("S1: a slow new build passes (%v), or guard lines %v", plain.Sections[0].NewVerdict, plain.guardLines())
	}
}

// S19 cordons every node: never those of an existing cluster the tool was pointed at.
func TestCordonOnlyOnTheLocalControlPlane(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node).Build()
	d := newDriver(cl, Spec{}, nil, nil, func(string) {})
	d.existing = true
	if err := d.Cordon(context.Background(), true); err == nil {
		t.Error("cordoned the nodes of an existing cluster")
	}
	d.existing = false
	testutil.Must(t, d.Cordon(context.Background(), true))
	testutil.Must(t, cl.Get(context.Background(), client.ObjectKeyFromObject(node), node))
	if !node.Spec.Unschedulable {
		t.Error("the local control plane's node is not cordoned")
	}
}
