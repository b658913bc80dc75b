package quarantine_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/gate/gatetest"
	"github.com/reloader-operator/reloader/internal/gate/quarantine"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/whatchanged"
)

var limits = flap.Limits{MaxChanges: 8, Window: 2 * time.Minute, Quiet: 5 * time.Minute}

func key(t *testing.T, b byte) hash.Key {
	t.Helper()
	k, err := hash.NewKey(bytes.Repeat([]byte{b}, hash.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keyOf(k hash.Key) func(context.Context) (hash.Key, error) {
	return func(context.Context) (hash.Key, error) { return k, nil }
}

// flapped is a table in which ConfigMap cfg of ns went A->B->A->B->A->B, written alternately by
// two field managers, until the breaker tripped; it returns the time of the last change.
func flapped(t *testing.T) (*flap.Table, time.Time) {
	t.Helper()
	tb := flap.NewTable(limits, 0)
	cm := gatetest.For("ns", "cfg", nil).Due().Target // any object named cfg in ns
	at := gatetest.Epoch.Add(-time.Minute)
	hashes := []string{"A", "B"}
	writers := []whatchanged.Writer{{Manager: "helm", Operation: "Update"}, {Manager: "argocd", Operation: "Apply"}}
	for i := range 6 {
		at = at.Add(2 * time.Second)
		w := writers[i%2]
		w.Time = at
		quarantine.Observe(tb, source.ConfigMap, cm, hashes[i%2], hashes[(i+1)%2], w, at)
	}
	if _, ok := tb.Status(flap.Key{Namespace: "ns", Kind: string(source.ConfigMap), Name: "cfg"}, gatetest.Epoch); !ok {
		t.Fatal("the breaker did not trip on six alternating changes")
	}
	return tb, at
}

func counted(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func check(t *testing.T, g gate.Gate, d gate.Due) gate.Verdict {
	t.Helper()
	v, err := g.Check(context.Background(), d)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return v
}

func TestAQuarantinedSourceHoldsUntilQuietAndTheEventNamesBothWriters(t *testing.T) {
	tb, last := flapped(t)
	held := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "held"}, []string{"reason"})
	g := quarantine.New(quarantine.Config{Table: tb, Key: keyOf(key(t, 1)), Held: held})
	v := check(t, g, gatetest.For("ns", "web", nil).Changed(source.ConfigMap, "cfg", "B", nil).Source(source.Secret, "other", "s", nil).Due())
	if v.Hold.Reason != flap.HoldReason || !v.Hold.Until.Equal(last.Add(limits.Quiet)) {
		t.Fatalf("hold = %+v, want quarantine until %v", v.Hold, last.Add(limits.Quiet))
	}
	if !strings.Contains(v.Hold.Why, "ConfigMap cfg quarantined by the flap breaker since") || !strings.Contains(v.Hold.Why, "kubectl reloader release configmap/cfg -n ns") {
		t.Errorf("why = %q", v.Hold.Why)
	}
	if len(v.Notices) != 1 {
		t.Fatalf("notices = %+v, want the quarantine's", v.Notices)
	}
	n := v.Notices[0]
	if !n.Warning || n.Reason != quarantine.ReasonSourceQuarantined || n.Once == "" || n.Alert == nil || n.Alert.Held != v.Hold.Why {
		t.Errorf("notice = %+v", n)
	}
	for _, w := range []string{"helm (Update", "argocd (Apply", "written alternately"} {
		if !strings.Contains(n.Message, w) {
			t.Errorf("the Event %q does not name %q", n.Message, w)
		}
	}
	if len(n.Count) != 1 {
		t.Fatalf("the notice counts %d counters, want the held counter", len(n.Count))
	}
	n.Count[0].Inc()
	if got := counted(t, held.WithLabelValues(flap.HoldReason)); got != 1 {
		t.Errorf("held{quarantine} = %v after the notice's count", got)
	}
	// The record of the quarantine is written with the reconcile, sealed for web.
	rec := v.Annotate[flap.RecordAnnotation]
	if rec == nil {
		t.Fatalf("annotate = %v, want the quarantine record", v.Annotate)
	}
	entries, err := flap.Open(key(t, 1), flap.Subject{Kind: "Deployment", Namespace: "ns", Name: "web", UID: "uid-web"}, *rec)
	if err != nil || len(entries) != 1 || entries[0].Source != "configmap/cfg" {
		t.Fatalf("record %q opens to %+v, %v", *rec, entries, err)
	}
	// Counts move, the set of quarantines does not: the same Once.
	v2 := check(t, g, gatetest.For("ns", "web", nil).Changed(source.ConfigMap, "cfg", "B", nil).At(gatetest.Epoch.Add(time.Second)).Due())
	if len(v2.Notices) != 1 || v2.Notices[0].Once != n.Once {
		t.Errorf("a second look says %+v, want the same Once %q", v2.Notices, n.Once)
	}
}

func TestNothingDueNothingHeldAndTheRecordGoes(t *testing.T) {
	g := quarantine.New(quarantine.Config{Table: flap.NewTable(limits, 0), Key: keyOf(key(t, 1))})
	v := check(t, g, gatetest.For("ns", "web", nil).Source(source.ConfigMap, "cfg", "A", nil).Due())
	if v.Hold.Reason != "" || len(v.Notices) != 0 || len(v.Annotate) != 0 {
		t.Fatalf("not due: %+v, want nothing", v)
	}
	// Due, not quarantined: no hold.
	v = check(t, g, gatetest.For("ns", "web", nil).Changed(source.ConfigMap, "cfg", "B", nil).Due())
	if v.Hold.Reason != "" || len(v.Notices) != 0 {
		t.Fatalf("due, quiet source: %+v, want no hold", v)
	}
	// A record left from a quarantine that is over is removed with the reconcile's write.
	old := flap.Seal(key(t, 1), flap.Subject{Kind: "Deployment", Namespace: "ns", Name: "web", UID: "uid-web"},
		[]flap.Entry{{Source: "configmap/cfg", Since: gatetest.Epoch.Add(-time.Hour), Last: gatetest.Epoch.Add(-time.Hour), Quiet: time.Minute, Seen: []string{flap.SeenTooOften}}})
	v = check(t, g, gatetest.For("ns", "web", map[string]string{flap.RecordAnnotation: old}).Source(source.ConfigMap, "cfg", "A", nil).Due())
	if r, ok := v.Annotate[flap.RecordAnnotation]; !ok || r != nil {
		t.Fatalf("annotate = %v, want the stale record removed", v.Annotate)
	}
	// No table (the breaker off): nothing held.
	if v := check(t, quarantine.New(quarantine.Config{}), gatetest.For("ns", "web", nil).Changed(source.ConfigMap, "cfg", "B", nil).Due()); v.Hold.Reason != "" {
		t.Fatalf("no table: %+v", v)
	}
}

func TestAReleaseAnnotationEndsTheQuarantineOnce(t *testing.T) {
	tb, _ := flapped(t)
	g := quarantine.New(quarantine.Config{Table: tb, Key: keyOf(key(t, 1))})
	release := map[string]string{flap.ReleaseAnnotation: gatetest.Epoch.Format(time.RFC3339)}
	d := gatetest.For("ns", "web", nil).Changed(source.ConfigMap, "cfg", "B", release).Due()

	// A dry run judges as the release would, and releases nothing.
	v := check(t, g, gatetest.For("ns", "web", nil).Changed(source.ConfigMap, "cfg", "B", release).DryRun().Due())
	if v.Hold.Reason != "" || len(v.Notices) != 0 || v.Annotate != nil {
		t.Fatalf("dry run: %+v, want no hold, no notice, nothing written", v)
	}
	if _, ok := tb.Status(flap.Key{Namespace: "ns", Kind: "configmap", Name: "cfg"}, gatetest.Epoch); !ok {
		t.Fatal("a dry run released the quarantine")
	}

	v = check(t, g, d)
	if v.Hold.Reason != "" || len(v.Notices) != 1 || v.Notices[0].Reason != quarantine.ReasonQuarantineReleased {
		t.Fatalf("release: %+v, want no hold and the release said", v)
	}
	if v = check(t, g, d); len(v.Notices) != 0 {
		t.Fatalf("the release said twice: %+v", v.Notices)
	}
	// A release from the future is bad input, reported; the quarantine stays.
	tb2, _ := flapped(t)
	g2 := quarantine.New(quarantine.Config{Table: tb2})
	v = check(t, g2, gatetest.For("ns", "web", nil).Changed(source.ConfigMap, "cfg", "B",
		map[string]string{flap.ReleaseAnnotation: gatetest.Epoch.Add(time.Hour).Format(time.RFC3339)}).Due())
	if v.Hold.Reason != flap.HoldReason || len(v.Invalid) != 1 {
		t.Fatalf("future release: %+v, want the hold and one invalid", v)
	}
}

func TestARestartTakesTheQuarantineBackFromTheRecord(t *testing.T) {
	tb, last := flapped(t)
	k := key(t, 1)
	before := quarantine.New(quarantine.Config{Table: tb, Key: keyOf(k)})
	rec := check(t, before, gatetest.For("ns", "web", nil).Changed(source.ConfigMap, "cfg", "B", nil).Due()).Annotate[flap.RecordAnnotation]
	if rec == nil {
		t.Fatal("no record")
	}
	ann := map[string]string{flap.RecordAnnotation: *rec}

	after := quarantine.New(quarantine.Config{Table: flap.NewTable(limits, 0), Key: keyOf(k)})
	v := check(t, after, gatetest.For("ns", "web", ann).Changed(source.ConfigMap, "cfg", "C", nil).Due())
	if v.Hold.Reason != flap.HoldReason || !v.Hold.Until.Equal(last.Add(limits.Quiet).Truncate(time.Second)) {
		t.Fatalf("after a restart: %+v, want the recorded quarantine", v.Hold)
	}

	// A record sealed by another key (forged), or for another workload, holds nothing.
	forged := quarantine.New(quarantine.Config{Table: flap.NewTable(limits, 0), Key: keyOf(key(t, 2))})
	if v := check(t, forged, gatetest.For("ns", "web", ann).Changed(source.ConfigMap, "cfg", "C", nil).Due()); v.Hold.Reason != "" {
		t.Fatalf("a record of another key held: %+v", v.Hold)
	}
	other := quarantine.New(quarantine.Config{Table: flap.NewTable(limits, 0), Key: keyOf(k)})
	if v := check(t, other, gatetest.For("ns", "api", ann).Changed(source.ConfigMap, "cfg", "C", nil).Due()); v.Hold.Reason != "" {
		t.Fatalf("web's record held api: %+v", v.Hold)
	}

	// explain (a dry run without the controller's table) reads the record as kept.
	v = check(t, quarantine.New(quarantine.Config{}), gatetest.For("ns", "web", ann).Changed(source.ConfigMap, "cfg", "C", nil).DryRun().Due())
	if v.Hold.Reason != flap.HoldReason || !strings.Contains(v.Hold.Why, "configmap/cfg quarantined") {
		t.Fatalf("dry run from the record: %+v", v.Hold)
	}
}

func TestTheRecordWaitsForTheKeyAWhile(t *testing.T) {
	tb, _ := flapped(t)
	rec := check(t, quarantine.New(quarantine.Config{Table: tb, Key: keyOf(key(t, 1))}),
		gatetest.For("ns", "web", nil).Changed(source.ConfigMap, "cfg", "B", nil).Due()).Annotate[flap.RecordAnnotation]
	ann := map[string]string{flap.RecordAnnotation: *rec}
	g := quarantine.New(quarantine.Config{Table: flap.NewTable(limits, 0),
		Key: func(context.Context) (hash.Key, error) { return hash.Key{}, errors.New("not loaded") }})
	clock := gatetest.NewClock()
	if _, err := g.Check(context.Background(), gatetest.For("ns", "web", ann).Changed(source.ConfigMap, "cfg", "C", nil).At(clock.Now()).Due()); err == nil {
		t.Fatal("no error while the key has not loaded: the reconcile would go ahead past the record")
	}
	clock.Step(quarantine.KeyPatience)
	if _, err := g.Check(context.Background(), gatetest.For("ns", "web", ann).Changed(source.ConfigMap, "cfg", "C", nil).At(clock.Now()).Due()); err != nil {
		t.Fatalf("still waiting for the key after %v: %v", quarantine.KeyPatience, err)
	}
	// A dry run reads no key.
	if _, err := g.Check(context.Background(), gatetest.For("ns", "web", ann).Changed(source.ConfigMap, "cfg", "C", nil).DryRun().Due()); err != nil {
		t.Fatalf("dry run: %v", err)
	}
}

func TestADeletedSourceLeavesTheTable(t *testing.T) {
	tb, _ := flapped(t)
	cm := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}}
	quarantine.Gone(tb, source.ConfigMap, cm)
	if _, ok := tb.Status(flap.Key{Namespace: "ns", Kind: "configmap", Name: "cfg"}, gatetest.Epoch); ok {
		t.Fatal("a deleted source stays in quarantine")
	}
}
