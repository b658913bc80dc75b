package explain

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// explain says a workload restarts by eviction and how far its restart has come, from the
// pods it controls through its ReplicaSet; without the flag, that the strategy is not enabled.
func TestExplainEvictRestart(t *testing.T) {
	ns := "evicting"
	namespace(t, ns)
	rec := reload.Record{"configmap/cfg": "h"}
	st := reload.StartEvicting(time.Now().Add(2*time.Second), rec) // a since the pods below precede
	d := deployment(ns, "web", withRecord(map[string]string{
		"reloader.stakater.com/auto":     "true",
		reload.RestartStrategyAnnotation: reload.RestartEvict,
		reload.EvictingAnnotation:        st.Encode(),
	}, rec), podSpec([]string{"cfg"}, nil))
	create(t, configMap(ns, "cfg", "v1"), d)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: d.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
	create(t, rs)
	for _, name := range []string{"web-1-a", "web-1-b"} {
		create(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: d.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: d.Spec.Template.Spec,
		})
	}
	// A pod with the labels that the Deployment does not control is not its.
	create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stray", Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec})

	enabled := testConf(t, func(o *options.Options) { o.EnableEvictStrategy = true })
	w, err := explainer(t, enabled, ns, ns).Workload(context.Background(), workload.Deployment(), "web")
	testutil.Must(t, err)
	notes := strings.Join(w.Notes, "\n")
	for _, want := range []string{"restart strategy: evict", "evict restart under way: 2 pods created before " + st.Since.Format(time.RFC3339) + " left"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}

	w, err = explainer(t, testConf(t), ns, ns).Workload(context.Background(), workload.Deployment(), "web")
	testutil.Must(t, err)
	if notes := strings.Join(w.Notes, "\n"); !strings.Contains(notes, "not enabled (--enable-evict-strategy)") {
		t.Errorf("notes do not say the strategy is off:\n%s", notes)
	}
}
