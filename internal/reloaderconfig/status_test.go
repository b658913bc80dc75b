package reloaderconfig

import (
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/api/v1alpha1"
)

func TestConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	missing := Issue{v1alpha1.ReasonSourceMissing, "ConfigMap app-config does not exist"}
	conflict := Issue{v1alpha1.ReasonConflictingRules, "strategy is set differently"}
	stalled := Issue{v1alpha1.ReasonRolloutStalled, "the rollout of Deployment web stalled"}
	type want struct {
		status           metav1.ConditionStatus
		reason, contains string
	}
	tests := []struct {
		name            string
		issues          []Issue
		ready, degraded want
	}{
		{"resolved", nil, want{"True", v1alpha1.ReasonResolved, ""}, want{"False", v1alpha1.ReasonResolved, ""}},
		{"missing source", []Issue{missing}, want{"False", v1alpha1.ReasonSourceMissing, "app-config"}, want{"True", v1alpha1.ReasonSourceMissing, "app-config"}},
		// Conflicts and stalled rollouts degrade; the rules still resolve.
		{"conflict", []Issue{conflict}, want{"True", v1alpha1.ReasonResolved, ""}, want{"True", v1alpha1.ReasonConflictingRules, "strategy"}},
		{"conflict then missing", []Issue{conflict, missing}, want{"False", v1alpha1.ReasonSourceMissing, "app-config"}, want{"True", v1alpha1.ReasonConflictingRules, "app-config"}},
		{"stalled", []Issue{stalled}, want{"True", v1alpha1.ReasonResolved, ""}, want{"True", v1alpha1.ReasonRolloutStalled, "web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Conditions(nil, tt.issues, 3, t0)
			for typ, w := range map[string]want{v1alpha1.ConditionReady: tt.ready, v1alpha1.ConditionDegraded: tt.degraded} {
				c := apimeta.FindStatusCondition(got, typ)
				if c == nil || c.Status != w.status || c.Reason != w.reason || !strings.Contains(c.Message, w.contains) || c.ObservedGeneration != 3 {
					t.Errorf("%s = %+v, want %+v", typ, c, w)
				}
			}
		})
	}

	// The same status and reason keep their time; a new reason takes the new time.
	first := Conditions(nil, []Issue{missing}, 1, t0)
	again := Conditions(first, []Issue{missing, {v1alpha1.ReasonKeyMissing, "no key"}}, 1, t1)
	if c := apimeta.FindStatusCondition(again, v1alpha1.ConditionDegraded); !c.LastTransitionTime.Equal(&t0) {
		t.Errorf("Degraded moved its time on a message change: %v", c.LastTransitionTime)
	}
	fixed := Conditions(again, nil, 2, t1)
	if c := apimeta.FindStatusCondition(fixed, v1alpha1.ConditionReady); !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("Ready kept its time through a change of status: %v", c.LastTransitionTime)
	}
}

// Thousands of issues still make a message within the bound.
func TestConditionMessageBounded(t *testing.T) {
	var issues []Issue
	for range 5000 {
		issues = append(issues, Issue{v1alpha1.ReasonKeyMissing, "ConfigMap app-config has no key some-long-key-name"})
	}
	c := apimeta.FindStatusCondition(Conditions(nil, issues, 1, metav1.Now()), v1alpha1.ConditionDegraded)
	if len(c.Message) > maxMessage+64 || !strings.HasSuffix(c.Message, "more issues") {
		t.Errorf("message of %d bytes ends %q", len(c.Message), c.Message[len(c.Message)-40:])
	}
}
