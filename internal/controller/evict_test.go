package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

func enableEvict(o *options.Options) { o.EnableEvictStrategy = true }

// Without --enable-evict-strategy, a workload that asks for evict is told, and its reload
// waits, record included; once enabled, the reload happens, without a template change, and
// the restart (no pods here: no controller-manager) ends at once.
func TestEvictStrategyWaitsUntilEnabled(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true", reload.RestartStrategyAnnotation: "evict"}, podSpec("cfg"))
	create(t, cm, d)
	stop := startReloader(t, ns)
	recorded(t, d)
	before := get(t, d).DeepCopy()

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	eventuallyEvent(t, ns, "web", controller.ReasonEvictStrategyDisabled)
	handled(t, d, cm)
	if after := get(t, d); after.Annotations[reload.RecordAnnotation] != before.Annotations[reload.RecordAnnotation] {
		t.Fatalf("record written while the reload waits: %s", after.Annotations[reload.RecordAnnotation])
	}
	stop()

	startReloader(t, ns, enableEvict)
	eventuallyEvent(t, ns, "web", controller.ReasonRestarted)
	after := get(t, d)
	if after.Annotations[reload.RecordAnnotation] == before.Annotations[reload.RecordAnnotation] {
		t.Errorf("record not updated")
	}
	if _, ok := after.Annotations[reload.EvictingAnnotation]; ok {
		t.Errorf("restart not ended: %s", after.Annotations[reload.EvictingAnnotation])
	}
	if !equality.Semantic.DeepEqual(after.Spec.Template, before.Spec.Template) {
		t.Errorf("template changed: %+v", after.Spec.Template)
	}
	if got := eventReasons(t, ns, "web"); !contains(got, controller.ReasonReloaded) {
		t.Errorf("no Reloaded Event: %v", got)
	}
}

// The evicting annotation is input: one whose time lies in the future (it would evict the
// replacements too) is refused with an Event and removed; one that belongs to another record
// is removed.
func TestEvictingAnnotationIsInput(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true", reload.RestartStrategyAnnotation: "evict"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns, enableEvict)
	recorded(t, d)
	for name, forge := range map[string]func(record string) string{
		"future": func(record string) string {
			return fmt.Sprintf(`{"since":%q,"record":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), reload.RecordDigest(record))
		},
		"other record": func(string) string {
			return reload.StartEvicting(time.Now(), reload.Record{"configmap/x": "y"}).Encode()
		},
		"not JSON": func(string) string { return "evict them all" },
	} {
		update(t, d, func(d *appsv1.Deployment) {
			d.Annotations[reload.EvictingAnnotation] = forge(d.Annotations[reload.RecordAnnotation])
		})
		testutil.Eventually(t, name+": annotation removed", func() error {
			if v, ok := get(t, d).Annotations[reload.EvictingAnnotation]; ok {
				return fmt.Errorf("still %s", v)
			}
			return nil
		})
	}
	eventuallyEvent(t, ns, "web", controller.ReasonInvalidAnnotation)
	if got := eventReasons(t, ns, "web"); contains(got, controller.ReasonRestarted) || contains(got, controller.ReasonEvicting) {
		t.Errorf("a forged restart was acted on: %v", got)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// A restart that reloader's RBAC does not allow (no list on pods) is reported with what to
// grant; the restart stays on the workload, to carry on once granted.
func TestEvictRefusedByRBAC(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true", reload.RestartStrategyAnnotation: "evict"}, podSpec("cfg"))
	create(t, cm, d)
	startReloaderAs(t, reloaderUser(t, ns, enableEvict, "pods"), ns, enableEvict)
	recorded(t, d)
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	testutil.Eventually(t, "ReloadFail naming list pods", func() error {
		var list eventsv1.EventList
		testutil.Must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
		for _, e := range list.Items {
			if e.Regarding.Name == "web" && e.Reason == controller.ReasonReloadFail && strings.Contains(e.Note, "does not allow list pods") {
				return nil
			}
		}
		return fmt.Errorf("events: %v", eventReasons(t, ns, "web"))
	})
	if _, ok := get(t, d).Annotations[reload.EvictingAnnotation]; !ok {
		t.Errorf("the restart was dropped")
	}
}

// With exactly the RBAC the table declares, a restart reads the pods through the Deployment's
// ReplicaSet, evicts each pod from before it once (a pod it does not control stays), and ends.
// (No controller-manager here: the pods are made by hand, Ready, never replaced; the
// Deployment wants one, so the second goes once the first is gone.)
func TestEvictWithTheTableRBAC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true", reload.RestartStrategyAnnotation: "evict"}, podSpec("cfg"))
	create(t, cm, d)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: d.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
	create(t, rs)
	pod := func(name string, owned bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
		}
		create(t, p)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		testutil.Must(t, k8s.Status().Update(ctx, p))
		return p
	}
	a, b, stray := pod("web-1-a", true), pod("web-1-b", true), pod("stray", false)
	startReloaderAs(t, reloaderUser(t, ns, enableEvict), ns, enableEvict)
	recorded(t, d)
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	eventuallyEvent(t, ns, "web", controller.ReasonRestarted)
	for _, p := range []*corev1.Pod{a, b} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}); err == nil {
			t.Errorf("pod %s was not evicted", p.Name)
		}
	}
	testutil.Must(t, k8s.Get(ctx, client.ObjectKeyFromObject(stray), &corev1.Pod{}))
	if got := eventReasons(t, ns, "web"); contains(got, controller.ReasonReloadFail) {
		t.Errorf("refused: %v", got)
	}
}
