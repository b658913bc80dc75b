package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/controller/generic"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// Generic targets go through the workloads' pipeline: these cover what the gates do to them
// that the other generic tests do not (an approval given, the minimum interval) and the
// scenario of a config naming a workload and a generic target at once.

// A reload held for approval goes, once, when the target is approved, and spends the approval.
func TestGenericTargetModeApproveThenApproved(t *testing.T) {
	t.Parallel()
	ns, cr, cm, changes := startGated(t, nil, func(o *options.Options) { o.Mode = "approve" })
	eventuallyEvent(t, ns, "rules", "ApprovalPending")
	noTemplateChange(t, cr, cm, changes)
	digest := annotationsOf(t, cr)[approval.PendingAnnotation]
	if digest == "" {
		t.Fatalf("no pending digest published on the target: %v", annotationsOf(t, cr))
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, approval.ApprovedAnnotation, digest)
	testutil.Must(t, k8s.Patch(context.Background(), cr.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))))
	// The target is not watched: the config's next reconcile (a poke of its source) finds it.
	genericHandled(t, "rules", cm)
	eventuallyEvent(t, ns, "rules", "Reloaded")
	genericHandled(t, "rules", cm)
	if n := changes(); n != 1 {
		t.Fatalf("the template changed %d times, want once for the approved content", n)
	}
	ann := annotationsOf(t, cr)
	for _, a := range []string{approval.ApprovedAnnotation, approval.PendingAnnotation} {
		if v, ok := ann[a]; ok {
			t.Errorf("%s still on the target after the reload: %q", a, v)
		}
	}
}

// The config's minimum interval: the first reload goes and stamps its time; the next change
// within the interval waits.
func TestGenericTargetMinReloadIntervalHolds(t *testing.T) {
	t.Parallel()
	ns, cr, cm, changes := startGated(t, func(c *v1alpha1.ReloaderConfig) {
		c.Spec.MinReloadInterval = &metav1.Duration{Duration: time.Hour}
	})
	eventuallyEvent(t, ns, "rules", "Reloaded")
	if at := annotationsOf(t, cr)[reload.LastReloadAnnotation]; at == "" {
		t.Fatalf("no %s written with the reload: %v", reload.LastReloadAnnotation, annotationsOf(t, cr))
	}
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["grafana.ini"] = "c" })
	eventuallyEvent(t, ns, "rules", "ReloadHeld")
	genericHandled(t, "rules", cm)
	if n := changes(); n != 1 {
		t.Fatalf("the template changed %d times, want 1: the second reload waits for the interval", n)
	}
}

// The scenario of the issue: a config in mode notify with a Deployment and a generic target;
// after a change neither rolls, both are notified, and both records move.
func TestGenericTargetConfigNotifyWithADeployment(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "grafana-ini", map[string]string{"grafana.ini": "a"})
	cr := dashboard(ns, "grafana")
	dep := deployment(ns, "web", nil, podSpec("grafana-ini"))
	cfg := genericConfig(ns, "rules", "grafana", "grafana-ini")
	cfg.Spec.Mode = "notify"
	cfg.Spec.Targets = []v1alpha1.Target{{Kind: "Deployment", Name: "web"}}
	create(t, cm, cr, dep, cfg)
	crChanges := templateChanges(t, cr, dashboardTemplate...)
	depChanges := templateChanges(t, dep)
	startReloader(t, ns, allowDashboards)
	before := recordedGeneric(t, cr, ns, "rules")
	recorded(t, dep)
	depRecord := get(t, dep).Annotations[reload.RecordAnnotation]

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["grafana.ini"] = "b" })
	eventuallyEvent(t, ns, "rules", "ReloadNotified") // the generic target's, on its config
	eventuallyEvent(t, ns, "web", "ReloadNotified")
	genericHandled(t, "rules", cm)
	handled(t, dep, cm)
	if n, m := crChanges(), depChanges(); n != 0 || m != 0 {
		t.Fatalf("mode notify rolled: the generic target's template changed %d times, the Deployment's %d", n, m)
	}
	if after := genericRecord(t, cr, ns, "rules"); after == before {
		t.Errorf("the generic target's record did not move: notify records the new content")
	}
	if after := get(t, dep).Annotations[reload.RecordAnnotation]; after == depRecord {
		t.Errorf("the Deployment's record did not move: notify records the new content")
	}
	if v := annotationsOf(t, cr, dashboardTemplate...)[generic.GenericTemplateAnnotation]; v != "" {
		t.Errorf("template annotation %q written in mode notify", v)
	}
}
