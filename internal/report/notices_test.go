package report_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reloader-operator/reloader/internal/gate"
)

// A notice's own counters count, once, when it is said, not when its Once keeps it quiet; a
// notice that waits for the write is said by SayWritten only, every time.
func TestANoticeCountsItsGatesCountersWhenSaidAndWrittenOnesWaitForTheWrite(t *testing.T) {
	r, rec := newReporter()
	ctx := context.Background()
	held := prometheus.NewCounter(prometheus.CounterOpts{Name: "held"})
	notified := prometheus.NewCounter(prometheus.CounterOpts{Name: "notified"})
	hold := gate.Said{Gate: "quarantine", Notice: gate.Notice{Warning: true, Reason: "SourceQuarantined", Message: "held", Once: "cfg since 10:00",
		Count: []prometheus.Counter{held}}}
	notice := gate.Said{Gate: "notify", Notice: gate.Notice{Reason: "ReloadNotified", Message: "would reload", Written: true,
		Count: []prometheus.Counter{notified}}}

	r.Say(ctx, "Deployment/ns/web", target, nil, []gate.Said{hold, notice}, true)
	r.Say(ctx, "Deployment/ns/web", target, nil, []gate.Said{hold, notice}, true)
	if got := value(held); got != 1 {
		t.Errorf("held counted %v times over two looks at one hold, want 1", got)
	}
	if got := value(notified); got != 0 {
		t.Errorf("a notice that waits for the write counted %v before it", got)
	}
	if len(rec.types) != 1 || rec.types[0] != "Warning SourceQuarantined" {
		t.Fatalf("events %v, want the hold's once and nothing of the notify", rec.types)
	}

	r.SayWritten(ctx, target, nil, []gate.Said{hold, notice})
	r.SayWritten(ctx, target, nil, []gate.Said{notice})
	if got := value(notified); got != 2 {
		t.Errorf("notified counted %v after two writes, want 2", got)
	}
	if got := value(held); got != 1 {
		t.Errorf("SayWritten said a notice that does not wait for the write: held %v", got)
	}
	if len(rec.types) != 3 || rec.types[1] != "Normal ReloadNotified" {
		t.Fatalf("events %v, want ReloadNotified after each write", rec.types)
	}
}
