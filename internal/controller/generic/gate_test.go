package generic

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

// The gates apply in reload.Decide's order: quarantine, mode, then interval and window.
func TestPlanGatesOrder(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	due := []reload.Change{{ID: source.ID{Kind: source.ConfigMap, Name: "cm"}, Hash: "h1"}}
	closed := reload.HoldState{Window: "daily 20:00-21:00 UTC", HasWindow: true}
	quarantined := reload.Hold{Reason: flap.HoldReason, Until: now.Add(time.Hour), Why: "flapping"}
	digest := approval.Digest(due)
	for _, tc := range []struct {
		name       string
		mode       approval.Mode
		target     map[string]string
		quarantine reload.Hold
		hold       reload.HoldState
		reason     string
		notify     bool
		approved   bool
	}{
		{name: "reload now", mode: approval.Reload},
		{name: "window closed", mode: approval.Reload, hold: closed, reason: reload.HoldReloadWindow},
		{name: "quarantine before notify", mode: approval.Notify, quarantine: quarantined, reason: flap.HoldReason},
		{name: "notify before window", mode: approval.Notify, hold: closed, notify: true},
		{name: "approval pending before window", mode: approval.Approve, hold: closed, reason: approval.HoldReason},
		{name: "approved, window closed", mode: approval.Approve, target: map[string]string{approval.ApprovedAnnotation: digest}, hold: closed, reason: reload.HoldReloadWindow, approved: true},
		{name: "approved", mode: approval.Approve, target: map[string]string{approval.ApprovedAnnotation: digest}, approved: true},
		{name: "target's mode annotation", mode: approval.Reload, target: map[string]string{approval.ModeAnnotation: "notify"}, notify: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := planGates(gateIn{Now: now, Target: tc.target, Due: due, DefaultMode: tc.mode, Quarantine: tc.quarantine, Hold: tc.hold,
				SourceAnn: func(reload.Change) map[string]string { return nil }, ApproveTarget: "dashboard/x -n ns"})
			if g.Hold.Reason != tc.reason || g.Notify != tc.notify || g.Approved != tc.approved {
				t.Fatalf("got hold %q notify %v approved %v; want %q %v %v", g.Hold.Reason, g.Notify, g.Approved, tc.reason, tc.notify, tc.approved)
			}
			if len(g.Invalid) > 0 {
				t.Fatalf("invalid: %v", g.Invalid)
			}
		})
	}
}

func TestRecordAnnotationPerConfig(t *testing.T) {
	cfg := func(ns, name string) *v1alpha1.ReloaderConfig {
		return &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	a := RecordAnnotation(cfg("b", strings.Repeat("x", 253)))
	if a == RecordAnnotation(cfg("b", "y")) || a == RecordAnnotation(cfg("c", strings.Repeat("x", 253))) {
		t.Fatal("two configs share a record annotation")
	}
	if _, name, _ := strings.Cut(a, "/"); len(name) > 63 {
		t.Fatalf("annotation name %q is longer than 63", name)
	}
}
