package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/controller/generic"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/testutil"
)

var dashboardTemplate = []string{"spec", "deployment", "spec", "template"}

// recordedGeneric waits for config ns/name's first record on cr.
func recordedGeneric(t *testing.T, cr *unstructured.Unstructured, ns, name string) string {
	t.Helper()
	testutil.Eventually(t, "the record of "+name+" on the CR", func() error {
		if genericRecord(t, cr, ns, name) == "" {
			return fmt.Errorf("no record: %v", annotationsOf(t, cr))
		}
		return nil
	})
	return genericRecord(t, cr, ns, name)
}

// A tenant's config may not have reloader patch a cluster-scoped object, nor a kind the admin
// did not allow: refused with the condition and a Warning, and nothing written.
func TestGenericTargetConfinedToAllowedNamespacedKinds(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cm", map[string]string{"k": "a"})
	cfg := genericConfig(ns, "rules", "grafana", "cm")
	cfg.Spec.GenericTargets = []v1alpha1.GenericTarget{
		{APIVersion: "v1", Kind: "Namespace", Name: ns, TemplatePath: "metadata"},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "reloader-test-any", TemplatePath: "metadata"},
	}
	create(t, cm, cfg)
	// Every kind allowed: the scope alone refuses these.
	startReloader(t, ns, func(o *options.Options) { o.GenericTargetKinds = []string{"*"} })
	configStatus(t, ns, "rules", "targets refused", func(c *v1alpha1.ReloaderConfig) error {
		cond := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionGenericTargets)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonTargetRefused {
			return fmt.Errorf("conditions: %+v", c.Status.Conditions)
		}
		for _, want := range []string{"Namespace " + ns, "ClusterRole", "cluster-scoped"} {
			if !strings.Contains(cond.Message, want) {
				return fmt.Errorf("message %q lacks %s", cond.Message, want)
			}
		}
		return nil
	})
	eventuallyEvent(t, ns, "rules", v1alpha1.ReasonTargetRefused)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	for k := range get(t, nsObj).Annotations {
		if strings.HasPrefix(k, generic.LegacyRecordAnnotation) {
			t.Fatalf("the namespace was written: %v", nsObj.Annotations)
		}
	}
}

func TestGenericTargetKindNotAllowedIsRefused(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "grafana-ini", map[string]string{"grafana.ini": "a"})
	cr := dashboard(ns, "grafana")
	create(t, cm, cr, genericConfig(ns, "rules", "grafana", "grafana-ini"))
	// Another kind than the target's allowed: the Dashboard is refused.
	startReloader(t, ns, func(o *options.Options) { o.GenericTargetKinds = []string{"apps/Deployment"} })
	configStatus(t, ns, "rules", "kind refused", func(c *v1alpha1.ReloaderConfig) error {
		cond := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionGenericTargets)
		if cond == nil || cond.Reason != v1alpha1.ReasonTargetRefused || !strings.Contains(cond.Message, "--generic-target-kinds") {
			return fmt.Errorf("conditions: %+v", c.Status.Conditions)
		}
		return nil
	})
	eventuallyEvent(t, ns, "rules", v1alpha1.ReasonTargetRefused)
	if rec := genericRecord(t, cr, ns, "rules"); rec != "" {
		t.Fatalf("a refused target was written: %q", rec)
	}
}

// Two configs naming one object keep a record each; the Secret part of the hash is keyed.
func TestGenericTargetRecordPerConfig(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cm-a", map[string]string{"k": "a"})
	sec := secret(ns, "sec-b", map[string]string{"password": "hunter2"})
	cr := dashboard(ns, "grafana")
	a := genericConfig(ns, "a", "grafana", "cm-a")
	b := genericConfig(ns, "b", "grafana", "")
	b.Spec.Sources = []v1alpha1.Source{{Kind: "Secret", Name: "sec-b"}}
	create(t, cm, sec, cr, a, b)
	startReloader(t, ns, allowDashboards, func(o *options.Options) { o.ReloaderNamespace = ns })
	ra, rb := recordedGeneric(t, cr, ns, "a"), recordedGeneric(t, cr, ns, "b")
	if ra == rb {
		t.Fatalf("both configs recorded %q", ra)
	}
	if !strings.Contains(rb, ":") {
		t.Fatalf("the Secret's hash %q carries no key ID: not keyed by the install key", rb)
	}
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "b" })
	testutil.Eventually(t, "a's record moves", func() error {
		if genericRecord(t, cr, ns, "a") == ra {
			return fmt.Errorf("a's record unchanged")
		}
		return nil
	})
	if got := genericRecord(t, cr, ns, "b"); got != rb {
		t.Fatalf("b's record changed with a's source: %q -> %q", rb, got)
	}
}

// startGated records the CR under config "rules" (changed by change), starts reloader and
// changes the source once; it returns the count of template changes.
func startGated(t *testing.T, change func(*v1alpha1.ReloaderConfig), configure ...func(*options.Options)) (ns string, cr *unstructured.Unstructured, cm *corev1.ConfigMap, changes func() int) {
	t.Helper()
	ns = newNamespace(t)
	cm = configMap(ns, "grafana-ini", map[string]string{"grafana.ini": "a"})
	cr = dashboard(ns, "grafana")
	cfg := genericConfig(ns, "rules", "grafana", "grafana-ini")
	if change != nil {
		change(cfg)
	}
	create(t, cm, cr, cfg)
	changes = templateChanges(t, cr, dashboardTemplate...)
	startReloader(t, ns, append([]func(*options.Options){allowDashboards}, configure...)...)
	recordedGeneric(t, cr, ns, "rules")
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["grafana.ini"] = "b" })
	return ns, cr, cm, changes
}

func noTemplateChange(t *testing.T, cr *unstructured.Unstructured, cm *corev1.ConfigMap, changes func() int) {
	t.Helper()
	genericHandled(t, "rules", cm)
	if n := changes(); n != 0 {
		t.Fatalf("the template changed %d times", n)
	}
	if v := annotationsOf(t, cr, dashboardTemplate...)[generic.GenericTemplateAnnotation]; v != "" {
		t.Fatalf("template annotation %q", v)
	}
}

func TestGenericTargetModeNotify(t *testing.T) {
	t.Parallel()
	ns, cr, cm, changes := startGated(t, func(c *v1alpha1.ReloaderConfig) { c.Spec.Mode = "notify" })
	eventuallyEvent(t, ns, "rules", "ReloadNotified")
	noTemplateChange(t, cr, cm, changes)
}

func TestGenericTargetModeApproveHolds(t *testing.T) {
	t.Parallel()
	ns, cr, cm, changes := startGated(t, nil, func(o *options.Options) { o.Mode = "approve" })
	eventuallyEvent(t, ns, "rules", "ApprovalPending")
	noTemplateChange(t, cr, cm, changes)
}

func TestGenericTargetReloadWindowHolds(t *testing.T) {
	t.Parallel()
	// A one-minute window two hours from now: closed.
	opens := time.Now().UTC().Add(2 * time.Hour)
	window := fmt.Sprintf("daily %s-%s UTC", opens.Format("15:04"), opens.Add(time.Minute).Format("15:04"))
	ns, cr, cm, changes := startGated(t, func(c *v1alpha1.ReloaderConfig) { c.Spec.ReloadWindow = window })
	eventuallyEvent(t, ns, "rules", "ReloadHeld")
	noTemplateChange(t, cr, cm, changes)
}

func TestGenericTargetReloadRateHolds(t *testing.T) {
	t.Parallel()
	ns, cr, cm, changes := startGated(t, nil, func(o *options.Options) { o.ReloadRate, o.ReloadBurst = 0.001, 1 })
	eventuallyEvent(t, ns, "rules", "Reloaded") // the burst's one token
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["grafana.ini"] = "c" })
	eventuallyEvent(t, ns, "rules", "ReloadHeld")
	genericHandled(t, "rules", cm)
	if n := changes(); n != 1 {
		t.Fatalf("the template changed %d times, want 1: the second reload waits for the rate", n)
	}
	_ = cr
}

func TestGenericTargetQuarantineHolds(t *testing.T) {
	t.Parallel()
	ns, cr, cm, changes := startGated(t, nil, func(o *options.Options) {
		o.FlapMaxChanges, o.FlapWindow, o.FlapQuiet = 8, 2*time.Minute, time.Hour
	})
	for i := range 5 {
		update(t, cm, func(c *corev1.ConfigMap) { c.Data["grafana.ini"] = []string{"a", "b"}[i%2] })
		time.Sleep(400 * time.Millisecond) // the subject: changes apart, a flap
	}
	eventuallyEvent(t, ns, "rules", "SourceQuarantined")
	before := changes()
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["grafana.ini"] = "z" })
	genericHandled(t, "rules", cm)
	if n := changes(); n != before {
		t.Fatalf("a quarantined source rolled the target: %d -> %d template changes", before, n)
	}
	_ = cr
}

func TestGenericTargetNamespaceSelector(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "grafana-ini", map[string]string{"grafana.ini": "a"})
	cr := dashboard(ns, "grafana")
	create(t, cm, cr, genericConfig(ns, "rules", "grafana", "grafana-ini"))
	startReloader(t, ns, allowDashboards, func(o *options.Options) { o.NamespaceSelector = "reloader:enabled" })
	// The config's status is written by the status controller: the config was handled.
	configStatus(t, ns, "rules", "Ready", func(c *v1alpha1.ReloaderConfig) error {
		if c := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady); c == nil {
			return fmt.Errorf("conditions: %+v", c)
		}
		return nil
	})
	genericHandled(t, "rules", cm)
	if rec := genericRecord(t, cr, ns, "rules"); rec != "" {
		t.Fatalf("a target in an unselected namespace was written: %q", rec)
	}
	setLabel(t, ns, "reloader", "enabled")
	recordedGeneric(t, cr, ns, "rules")
}
