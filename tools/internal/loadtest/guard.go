package loadtest

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The guardrail scenarios (issue 23): what a build lets through when a source flaps (S18) and
// when a shared source gets a content its workloads cannot run on (S19). Upstream has neither
// guardrail; the figures show each side's beside the other's.

// Checks of the guardrail scenarios.
const (
	// CheckFlap: rollouts per workload while two writers flapped a Secret, once it was quiet,
	// and on a single change after; the quarantine the build reported (S18).
	CheckFlap = "flap"
	// CheckSpread: the failure spread, Deployments rolled onto a content their pods can't run
	// on, and the rollouts onto the fix (S19).
	CheckSpread = "failure-spread"
)

// Phases the guardrail scenarios mark (Driver.Mark), read by their checks.
const (
	markFlapStart = "flap: writers alternating"
	markFlapOver  = "flap: writers stopped"
	markSingle    = "flap: one later change"
	markBad       = "spread: nodes cordoned, bad content written"
	markFix       = "spread: fixed content written, nodes uncordoned"
)

const (
	// flapWriterA and flapWriterB are the two field managers that fight over S18's Secret.
	flapWriterA = "loadtest-writer-a"
	flapWriterB = "loadtest-writer-b"
	// flapGap is the time between two writes of the flap (the test: 30 in 3 minutes).
	flapGap = 6 * time.Second
	// flapMin is the shortest flap, whatever the scale: ten writes, enough for the breaker's
	// patterns (four switches of writer, three returns to an earlier content) to show.
	flapMin = time.Minute
	// flapQuiet is S18's Secret's quiet period (its annotation): the time a quarantine lasts
	// after the last change.
	flapQuiet = 30 * time.Second
	// flapGrace: a rollout up to this long after the last write of the flap counts as one of
	// the flap's (a build that rolls per write lands the last one within it).
	flapGrace = 5 * time.Second
	// flapHandful is the most rollouts per workload the flap may cause (the issue: "at most
	// a handful").
	flapHandful = 5
	// spreadDeadline is S19's Deployments' progressDeadlineSeconds: a rollout whose pods stay
	// pending stalls this long after it starts.
	spreadDeadline = 5
	// spreadMin is the shortest time S19's bad content stays, whatever the scale: the
	// rollouts must have time to stall.
	spreadMin = 20 * time.Second
	// spreadCanary is the most Deployments S19's bad content may reach: the first wave.
	spreadCanary = 1
	// spreadComplete bounds the wait for every Deployment to complete on the fixed content.
	spreadComplete = 3 * time.Minute
)

// flapping builds S18: a Secret used by n Deployments; its annotations give this project's
// flap breaker a quiet period short enough for the scenario (upstream ignores them).
func flapping(p Params) Spec {
	var b builder
	ns := b.ns("s18")
	sec := b.source(Secret, ns, "flapping-secret", 128)
	sec.Annotations = map[string]string{"reloader.dev/flap-window": "10m", "reloader.dev/flap-quiet": flapQuiet.String()}
	b.Sources[0] = sec
	for i := range p.N(5) {
		b.workload(Deployment, ns, fmt.Sprintf("flapped-%d", i), uses(sec))
	}
	// The run may turn the breaker off for the other scenarios (--flap-max-changes=0): on
	// here, at its default limit.
	b.OwnArgs = []string{"--flap-max-changes=8"}
	b.Holds = "the flap breaker holds reloads"
	b.Checks = []string{CheckFlap}
	return b.Spec
}

// flap alternates the Secret's content between A and B, written by two field managers, every
// flapGap for the design's 3 minutes (at least flapMin); then leaves it quiet for its quiet
// period and a margin, and changes it once more.
func flap(ctx context.Context, d *Driver, s Spec, p Params) error {
	sec := s.Sources[0]
	d.Mark(markFlapStart)
	err := every(ctx, max(p.D(3*time.Minute), flapMin), flapGap, func(i int) error {
		if i%2 == 0 {
			return d.WriteAs(ctx, sec, 1, flapWriterA)
		}
		return d.WriteAs(ctx, sec, 2, flapWriterB)
	})
	if err != nil {
		return err
	}
	d.Mark(markFlapOver)
	if err := sleep(ctx, flapQuiet+15*time.Second); err != nil {
		return err
	}
	d.Mark(markSingle)
	return d.WriteAs(ctx, sec, 3, flapWriterA)
}

// failingShared builds S19: one ConfigMap used by n Deployments with a short progress
// deadline. The ConfigMap opts into health-gated waves (this project's build; upstream
// ignores the annotation).
func failingShared(p Params) Spec {
	var b builder
	ns := b.ns("s19")
	cm := b.source(ConfigMap, ns, "shared-config", 256)
	cm.Annotations = map[string]string{"reloader.dev/waves": "true"}
	b.Sources[0] = cm
	for i := range p.N(40) {
		b.workload(Deployment, ns, fmt.Sprintf("shared-%d", i), uses(cm))
		b.Workloads[i].ProgressDeadline = ptr.To[int32](spreadDeadline)
	}
	b.Holds = "waves hold later waves"
	b.Checks = []string{CheckSpread}
	return b.Spec
}

// spread writes a bad content with every node cordoned (the new pods stay pending: their
// rollouts stall as on a content that never becomes ready), keeps it for the design's minute
// (at least spreadMin), counts the Deployments stalled, then writes the fixed content and
// uncordons the nodes.
func spread(ctx context.Context, d *Driver, s Spec, p Params) error {
	// The Deployments' first rollouts must be complete before the nodes are cordoned.
	complete := func() (int, int, error) { return rolloutStates(ctx, d.client, s.Workloads) }
	if err := Poll(ctx, 2*time.Minute, func() bool { n, _, err := complete(); return err == nil && n == len(s.Workloads) }); err != nil {
		n, _, _ := complete()
		return fmt.Errorf("%d of %d Deployments complete before the bad content: %w", n, len(s.Workloads), err)
	}
	cm := s.Sources[0]
	if err := d.Cordon(ctx, true); err != nil {
		return err
	}
	d.Mark(markBad)
	if err := d.Update(ctx, cm); err != nil {
		return err
	}
	if err := sleep(ctx, max(p.D(time.Minute), spreadMin)); err != nil {
		return err
	}
	_, stalled, err := complete()
	if err != nil {
		return err
	}
	d.Figure(CheckFigure{Name: "Deployments stalled on the bad content (ProgressDeadlineExceeded)", Value: float64(stalled), Summary: true})
	// The fix first, then the nodes: no rollout of the bad content completes in between.
	d.Mark(markFix)
	if err := d.Update(ctx, cm); err != nil {
		return err
	}
	return d.Cordon(ctx, false)
}

// rolloutStates counts the Deployments among ws whose rollout is complete, and those whose
// rollout stalled (Progressing False, ProgressDeadlineExceeded).
func rolloutStates(ctx context.Context, cl client.Client, ws []Workload) (complete, stalled int, err error) {
	for _, w := range ws {
		if w.Kind != Deployment {
			continue
		}
		var dep appsv1.Deployment
		if err := cl.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Name}, &dep); err != nil {
			return 0, 0, err
		}
		if rolloutComplete(&dep) {
			complete++
		}
		for _, c := range dep.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
				stalled++
			}
		}
	}
	return complete, stalled, nil
}

// rolloutComplete is kubectl rollout status's test: the controller saw the latest spec and
// every replica is updated and available, none of an older template left.
func rolloutComplete(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want
}

// changesIn counts the times in [from, to); a zero to is no upper bound.
func changesIn(ts []time.Time, from, to time.Time) int {
	n := 0
	for _, t := range ts {
		if !t.Before(from) && (to.IsZero() || t.Before(to)) {
			n++
		}
	}
	return n
}

// perWorkload is the most and the fewest changes in [from, to) of any tracked workload.
func perWorkload(in checkInput, from, to time.Time) (most, fewest int) {
	fewest = -1
	for w := range in.tracked {
		n := changesIn(in.changes[w], from, to)
		most = max(most, n)
		if fewest < 0 || n < fewest {
			fewest = n
		}
	}
	return most, max(fewest, 0)
}

func marked(in checkInput, names ...string) error {
	for _, n := range names {
		if in.marks[n].IsZero() {
			return fmt.Errorf("phase %q was not reached", n)
		}
	}
	return nil
}

// flapFigures: S18's rollouts per workload in each phase, and what the build reported.
func flapFigures(ctx context.Context, cl client.Client, in checkInput) ([]CheckFigure, error) {
	if err := marked(in, markFlapStart, markFlapOver, markSingle); err != nil {
		return nil, err
	}
	start, over, single := in.marks[markFlapStart], in.marks[markFlapOver].Add(flapGrace), in.marks[markSingle]
	during, _ := perWorkload(in, start, over)
	quiet, _ := perWorkload(in, over, single)
	after, _ := perWorkload(in, single, time.Time{})
	out := []CheckFigure{
		{Name: "rollouts per workload while two writers flapped its Secret (most)", Value: float64(during), Max: limit(flapHandful), Summary: true},
		{Name: "rollouts per workload once the Secret was quiet (most)", Value: float64(quiet)},
		{Name: "rollouts per workload on one later change (most)", Value: float64(after)},
	}
	// The gauge of quarantined sources, at its highest: a build without it shows nothing.
	peak, seen := 0.0, false
	for _, s := range in.samples {
		if s.Metrics == nil {
			continue
		}
		if v, ok := s.Metrics.Sums["reloader_quarantined_sources"]; ok {
			peak, seen = max(peak, v), true
		}
	}
	if seen {
		out = append(out, CheckFigure{Name: "reloader_quarantined_sources, highest", Value: peak, Summary: true})
	}
	events, naming, err := countEvents(ctx, cl, in, "SourceQuarantined", func(note string) bool {
		return strings.Contains(note, flapWriterA) && strings.Contains(note, flapWriterB)
	})
	if err != nil {
		return nil, err
	}
	// The breaker must say who fought: a build without one fails here, as it should on the
	// guardrail this scenario is for.
	return append(out, CheckFigure{Name: "SourceQuarantined Events", Value: float64(events)},
		CheckFigure{Name: "SourceQuarantined Events naming both writers", Value: float64(naming), Min: limit(1), Summary: true}), nil
}

// countEvents counts the Events with reason in the tracked workloads' namespaces, and those
// of them whose note passes match.
func countEvents(ctx context.Context, cl client.Client, in checkInput, reason string, match func(note string) bool) (all, matched int, err error) {
	namespaces := map[string]bool{}
	for w := range in.tracked {
		namespaces[in.specs[w].Namespace] = true
	}
	for ns := range namespaces {
		var list eventsv1.EventList
		if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return 0, 0, fmt.Errorf("list Events: %w", err)
		}
		for _, e := range list.Items {
			if e.Reason != reason {
				continue
			}
			all++
			if match(e.Note) {
				matched++
			}
		}
	}
	return all, matched, nil
}

// spreadFigures: S19's failure spread and rollouts onto the fix; it waits (spreadComplete at
// most) for every Deployment to complete on the fixed content.
func spreadFigures(ctx context.Context, cl client.Client, in checkInput) ([]CheckFigure, error) {
	if err := marked(in, markBad, markFix); err != nil {
		return nil, err
	}
	bad, fix := in.marks[markBad], in.marks[markFix]
	spread := 0
	for w := range in.tracked {
		if changesIn(in.changes[w], bad, fix) > 0 {
			spread++
		}
	}
	most, fewest := perWorkload(in, fix, time.Time{})
	ws := make([]Workload, 0, len(in.tracked))
	for w := range in.tracked {
		ws = append(ws, in.specs[w])
	}
	complete := 0
	_ = Poll(ctx, spreadComplete, func() bool {
		n, _, err := rolloutStates(ctx, cl, ws)
		complete = n
		return err == nil && n == len(ws)
	})
	// This project's build reports a stalled rollout (a Warning Event RolloutStalled); upstream
	// does not.
	stalledEvents, _, err := countEvents(ctx, cl, in, "RolloutStalled", func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	return []CheckFigure{
		// Waves roll a canary first and halt when it stalls: the bad content reaches it alone.
		{Name: "failure spread: Deployments rolled onto the bad content", Value: float64(spread), Max: limit(spreadCanary), Summary: true},
		{Name: "RolloutStalled Events", Value: float64(stalledEvents)},
		// The fix rolls every Deployment once: none left on the bad content, none twice.
		{Name: "rollouts per Deployment onto the fixed content (most)", Value: float64(most), Max: limit(1), Summary: true},
		{Name: "rollouts per Deployment onto the fixed content (fewest)", Value: float64(fewest), Min: limit(1)},
		{Name: "Deployments not complete on the fixed content", Value: float64(len(ws) - complete), Max: limit(0)},
	}, nil
}
