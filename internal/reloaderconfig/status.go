package reloaderconfig

import (
	"fmt"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/api/v1alpha1"
)

// Issue is one thing wrong with a config, as its status names it: Reason is one of the
// v1alpha1 reasons, Message says what to fix.
type Issue struct {
	Reason  string
	Message string
}

// blocking reports whether the issue keeps part of the rules from resolving (Ready is False),
// or only degrades them: a conflict leaves a setting to another config, a stalled rollout is
// the workload's own trouble.
func (i Issue) blocking() bool {
	return i.Reason != v1alpha1.ReasonConflictingRules && i.Reason != v1alpha1.ReasonRolloutStalled
}

// maxMessage bounds a condition message well under the API's 32 KiB limit: a config with
// thousands of missing keys still writes a status.
const maxMessage = 4096

// Conditions returns Ready and Degraded for the issues, from the previous conditions old. A
// condition whose status and reason did not change keeps its lastTransitionTime, so that
// rewriting the same status is no change.
func Conditions(old []metav1.Condition, issues []Issue, generation int64, now metav1.Time) []metav1.Condition {
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonResolved, Message: "every target and source resolved", ObservedGeneration: generation}
	degraded := metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonResolved, Message: "nothing to fix", ObservedGeneration: generation}
	if blocking := slices.IndexFunc(issues, Issue.blocking); blocking >= 0 {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, issues[blocking].Reason, messages(issues, Issue.blocking)
	}
	if len(issues) > 0 {
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, issues[0].Reason, messages(issues, nil)
	}
	out := []metav1.Condition{ready, degraded}
	// Conditions other controllers own (GenericTargetsAccessible) stay as they are.
	for _, c := range old {
		if c.Type != v1alpha1.ConditionReady && c.Type != v1alpha1.ConditionDegraded {
			out = append(out, c)
		}
	}
	for i := range out[:2] {
		out[i].LastTransitionTime = now
		if prev := apimeta.FindStatusCondition(old, out[i].Type); prev != nil &&
			prev.Status == out[i].Status && prev.Reason == out[i].Reason {
			out[i].LastTransitionTime = prev.LastTransitionTime
		}
	}
	return out
}

// messages joins the messages of the issues keep chooses (all when nil), within maxMessage.
func messages(issues []Issue, keep func(Issue) bool) string {
	var b strings.Builder
	for n, i := range issues {
		if keep != nil && !keep(i) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		if b.Len()+len(i.Message) > maxMessage {
			b.WriteString("and " + plural(len(issues)-n, "more issue"))
			break
		}
		b.WriteString(i.Message)
	}
	return b.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
