package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/controller/generic"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// dashboard is a Grafana-like CR (test/crds/grafana-like.yaml) with its pod template at
// spec.deployment.spec.template.
func dashboard(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"deployment": map[string]any{"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"app": "grafana"}},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "grafana", "image": "grafana"}}},
		}}}},
	}}
	u.SetAPIVersion("operator.reloader.test/v1beta1")
	u.SetKind("Dashboard")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func genericConfig(ns, name, target, cm string) *v1alpha1.ReloaderConfig {
	return &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ReloaderConfigSpec{
			Sources: []v1alpha1.Source{{Kind: "ConfigMap", Name: cm}},
			GenericTargets: []v1alpha1.GenericTarget{{APIVersion: "operator.reloader.test/v1beta1", Kind: "Dashboard",
				Name: target, TemplatePath: "spec.deployment.spec.template"}},
		}}
}

// genericRecord is the record of config ns/name on u.
func genericRecord(t *testing.T, u *unstructured.Unstructured, ns, name string) string {
	t.Helper()
	return annotationsOf(t, u)[generic.RecordAnnotation(&v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})]
}

// allowDashboards allows the test CRD's kind as a generic target.
func allowDashboards(o *options.Options) {
	o.GenericTargetKinds = []string{"operator.reloader.test/Dashboard"}
}

func annotationsOf(t *testing.T, u *unstructured.Unstructured, path ...string) map[string]string {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(u), got))
	if len(path) == 0 {
		return got.GetAnnotations()
	}
	m, _, _ := unstructured.NestedStringMap(got.Object, append(path, "metadata", "annotations")...)
	return m
}

func TestGenericTargetPatchedOncePerChange(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "grafana-ini", map[string]string{"grafana.ini": "a"})
	cr := dashboard(ns, "grafana")
	tpl := []string{"spec", "deployment", "spec", "template"}
	create(t, cm, cr, genericConfig(ns, "rules", "grafana", "grafana-ini"))
	changes := templateChanges(t, cr, tpl...)
	startReloader(t, ns, allowDashboards)

	// First sight records the hash and rolls nothing.
	testutil.Eventually(t, "the record on the CR", func() error {
		if genericRecord(t, cr, ns, "rules") == "" {
			return fmt.Errorf("no record: %v", annotationsOf(t, cr))
		}
		return nil
	})
	genericHandled(t, "rules", cm)
	if n := changes(); n != 0 {
		t.Fatalf("first sight changed the template %d times", n)
	}
	first := genericRecord(t, cr, ns, "rules")

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["grafana.ini"] = "b" })
	testutil.Eventually(t, "the template's annotation", func() error {
		got := annotationsOf(t, cr, tpl...)[generic.GenericTemplateAnnotation]
		if got == "" || got == first {
			return fmt.Errorf("template annotations: %v", annotationsOf(t, cr, tpl...))
		}
		return nil
	})
	genericHandled(t, "rules", cm)
	if n := changes(); n != 1 {
		t.Fatalf("one change of the source changed the template %d times, want 1", n)
	}
	if rec, tplHash := genericRecord(t, cr, ns, "rules"), annotationsOf(t, cr, tpl...)[generic.GenericTemplateAnnotation]; rec != tplHash {
		t.Fatalf("record %q, template %q", rec, tplHash)
	}
	eventuallyEvent(t, ns, "rules", "Reloaded")
	cfg := configStatus(t, ns, "rules", "access granted", func(c *v1alpha1.ReloaderConfig) error {
		if c := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionGenericTargets); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions: %+v", c)
		}
		return nil
	})
	// The status controller's Ready and Degraded stay beside it.
	if c := apimeta.FindStatusCondition(cfg.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("no Ready condition: %+v", cfg.Status.Conditions)
	}

	// Without generic targets, the condition goes.
	update(t, cfg, func(c *v1alpha1.ReloaderConfig) {
		c.Spec.GenericTargets, c.Spec.Targets = nil, []v1alpha1.Target{{Kind: "Deployment", Name: "web"}}
	})
	configStatus(t, ns, "rules", "no access condition", func(c *v1alpha1.ReloaderConfig) error {
		if c := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionGenericTargets); c != nil {
			return fmt.Errorf("still %+v", c)
		}
		return nil
	})
}

func TestGenericTargetRefusedAccessIsReported(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "grafana-ini", map[string]string{"grafana.ini": "a"})
	cr := dashboard(ns, "grafana")
	create(t, cm, cr, genericConfig(ns, "rules", "grafana", "grafana-ini"))
	// Reloader's own RBAC, and nothing on dashboards: the user's to grant.
	startReloaderAs(t, reloaderUser(t, ns, nil), ns, allowDashboards)

	configStatus(t, ns, "rules", "access denied", func(c *v1alpha1.ReloaderConfig) error {
		cond := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionGenericTargets)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonAccessDenied {
			return fmt.Errorf("conditions: %+v", c.Status.Conditions)
		}
		for _, want := range []string{`"operator.reloader.test"`, `"dashboards"`, "get, patch"} {
			if !strings.Contains(cond.Message, want) {
				return fmt.Errorf("message %q lacks %s", cond.Message, want)
			}
		}
		return nil
	})
	eventuallyEvent(t, ns, "rules", v1alpha1.ReasonAccessDenied)
	// kubectl get reloaderconfigs -o wide says it too.
	table := getTable(t, ns)
	col := slices.IndexFunc(table.ColumnDefinitions, func(c metav1.TableColumnDefinition) bool { return c.Name == "Generic Targets" })
	if col < 0 || len(table.Rows) != 1 || table.Rows[0].Cells[col] != v1alpha1.ReasonAccessDenied {
		t.Fatalf("table: columns %v, rows %v", table.ColumnDefinitions, table.Rows)
	}
	if rec := genericRecord(t, cr, ns, "rules"); rec != "" {
		t.Fatalf("a refused target was written: %q", rec)
	}
}

func TestGenericTargetBadTemplatePathRefusedByCRD(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	for _, path := range []string{"spec..template", "spec.template-x", strings.Repeat("a.", 10) + "b", "$x", ""} {
		cfg := genericConfig(ns, "bad", "grafana", "cm")
		cfg.Spec.GenericTargets[0].TemplatePath = path
		err := k8s.Create(context.Background(), cfg)
		if err == nil {
			t.Errorf("templatePath %q: accepted", path)
			_ = k8s.Delete(context.Background(), cfg)
			continue
		}
		if !strings.Contains(err.Error(), "templatePath") {
			t.Errorf("templatePath %q: %v", path, err)
		}
	}
}

func TestGenericTargetTopLevelOwner(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "grafana-ini", map[string]string{"grafana.ini": "a"})
	cr := dashboard(ns, "grafana")
	create(t, cm, cr)
	get(t, cr)
	// The Deployment the operator made from the CR, controlled by it.
	dep := deployment(ns, "grafana-deployment", nil, podSpec())
	dep.OwnerReferences = []metav1.OwnerReference{{APIVersion: cr.GetAPIVersion(), Kind: cr.GetKind(), Name: cr.GetName(),
		UID: cr.GetUID(), Controller: ptrTo(true)}}
	cfg := genericConfig(ns, "rules", "", "grafana-ini")
	cfg.Spec.GenericTargets[0].OwnerOf = &v1alpha1.WorkloadRef{Kind: "Deployment", Name: "grafana-deployment"}
	create(t, dep, cfg)
	tpl := []string{"spec", "deployment", "spec", "template"}
	depChanges := templateChanges(t, dep)
	startReloader(t, ns, allowDashboards)

	testutil.Eventually(t, "the record on the owner", func() error {
		if genericRecord(t, cr, ns, "rules") == "" {
			return fmt.Errorf("no record: %v", annotationsOf(t, cr))
		}
		return nil
	})
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["grafana.ini"] = "b" })
	testutil.Eventually(t, "the owner's template annotation", func() error {
		if annotationsOf(t, cr, tpl...)[generic.GenericTemplateAnnotation] == "" {
			return fmt.Errorf("template annotations: %v", annotationsOf(t, cr, tpl...))
		}
		return nil
	})
	genericHandled(t, "rules", cm)
	if n := depChanges(); n != 0 {
		t.Fatalf("the owned Deployment's template changed %d times: the operator's CR is the one to patch", n)
	}
}

func ptrTo[T any](v T) *T { return &v }
