package controller_test

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

func reloaderConfig(ns, name string, targets []v1alpha1.Target, sources ...v1alpha1.Source) *v1alpha1.ReloaderConfig {
	return &v1alpha1.ReloaderConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.ReloaderConfigSpec{Targets: targets, Sources: sources},
	}
}

func byName(kind, name string) v1alpha1.Target { return v1alpha1.Target{Kind: kind, Name: name} }

func bySelector(kind string, labels map[string]string) v1alpha1.Target {
	return v1alpha1.Target{Kind: kind, Selector: &v1alpha1.LabelSelector{MatchLabels: labels}}
}

func sourceNamed(kind, name string) v1alpha1.Source { return v1alpha1.Source{Kind: kind, Name: name} }

// eventuallyRecorded waits until the record on obj holds source ("configmap/name"), or, with
// want false, no longer holds it.
func eventuallyRecorded(t *testing.T, obj client.Object, src string, want bool) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("%s recorded: %v", src, want), func() error {
		rec, err := reload.ParseRecord(get(t, obj).GetAnnotations()[reload.RecordAnnotation])
		if err != nil {
			return err
		}
		if _, ok := rec[src]; ok != want {
			return fmt.Errorf("record %v: %s there is %v, want %v", rec, src, ok, want)
		}
		return nil
	})
}

// changeData changes one key of a ConfigMap.
func changeData(t *testing.T, cm *corev1.ConfigMap, key, value string) {
	t.Helper()
	update(t, cm, func(c *corev1.ConfigMap) { c.Data[key] = value })
}

// A workload without any annotation reloads through a ReloaderConfig: by name, by label
// selector, and the sources it references with auto. Sources the rules leave out change
// nothing.
func TestReloaderConfigReloadsUnannotatedWorkloads(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	named := configMap(ns, "named", map[string]string{"k": "v1"})
	labelled := configMap(ns, "labelled", map[string]string{"k": "v1"})
	labelled.Labels = map[string]string{"tier": "config"}
	referenced := configMap(ns, "referenced", map[string]string{"k": "v1"})
	other := configMap(ns, "other", map[string]string{"k": "v1"})
	sec := secret(ns, "sec", map[string]string{"k": "v1"})
	tpl := podSpec("referenced", "other")
	tpl.Labels = map[string]string{"app": "shop"}
	d := deployment(ns, "web", nil, tpl)
	d.Labels = map[string]string{"team": "shop"}
	cfg := reloaderConfig(ns, "shop", []v1alpha1.Target{bySelector("Deployment", map[string]string{"team": "shop"})},
		sourceNamed("ConfigMap", "named"),
		v1alpha1.Source{Kind: "ConfigMap", Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "config"}}},
		v1alpha1.Source{Kind: "Secret", Auto: true}, // the Deployment references no Secret
	)
	cfg.Spec.Sources = append(cfg.Spec.Sources, v1alpha1.Source{Kind: "ConfigMap", Name: "referenced"})
	create(t, named, labelled, referenced, other, sec, d, cfg)
	startReloader(t, ns)
	recorded(t, d)
	count := templateChanges(t, d)

	changeData(t, other, "k", "v2")
	update(t, sec, func(s *corev1.Secret) { s.StringData = map[string]string{"k": "v2"} })
	waitChanges(t, "sources the rules leave out", count, 0, d, other, sec)

	changeData(t, named, "k", "v2")
	waitChanges(t, "a source named by the config", count, 1, d, named)
	changeData(t, labelled, "k", "v2")
	waitChanges(t, "a source selected by label", count, 2, d, labelled)
	changeData(t, referenced, "k", "v2")
	waitChanges(t, "a referenced source named by the config", count, 3, d, referenced)
	w := get(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
	if v, ok := envOf(&w.Spec.Template, "app", "STAKATER_NAMED_CONFIGMAP"); !ok || v == "" {
		t.Errorf("named source not written to the first container: %q %v", v, ok)
	}
	eventuallyEvent(t, ns, "web", "Reloaded")
}

// A workload chosen by both its annotation and a ReloaderConfig rolls once per change.
func TestReloaderConfigAndAnnotationRollOnce(t *testing.T) {
	t.Parallel()
	ns, cm, d, _ := autoDeployment(t)
	create(t, reloaderConfig(ns, "same", []v1alpha1.Target{byName("Deployment", "web")}, sourceNamed("ConfigMap", "cfg")))
	handled(t, d)
	count := templateChanges(t, d)
	changeData(t, cm, "k", "v2")
	waitChanges(t, "one change", count, 1, d, cm)
	changeData(t, cm, "k", "v3")
	waitChanges(t, "another change", count, 2, d, cm)
}

// Creating and deleting a ReloaderConfig restarts nothing; once deleted, its rules stop.
func TestReloaderConfigLifecycleRestartsNothing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", nil, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns)
	count := templateChanges(t, d)
	cfg := reloaderConfig(ns, "web", []v1alpha1.Target{byName("Deployment", "web")}, v1alpha1.Source{Kind: "ConfigMap", Auto: true})
	create(t, cfg)
	recorded(t, d)
	waitChanges(t, "config created", count, 0, d, cfg)

	changeData(t, cm, "k", "v2")
	waitChanges(t, "change under the config", count, 1, d, cm)

	testutil.Must(t, k8s.Delete(context.Background(), cfg))
	eventuallyRecorded(t, d, "configmap/cfg", false)
	waitChanges(t, "config deleted", count, 1, d, cfg)
	changeData(t, cm, "k", "v3")
	waitChanges(t, "change after the config is gone", count, 1, d, cm, cfg)
}

// Sources and targets that a config names before they exist are picked up when they appear:
// a created source is recorded (it reloads on create only with --reload-on-create), a created
// target is recorded, and their changes reload from then on. A workload that gains the
// selected label is a target from then on.
func TestReloaderConfigSourcesAndTargetsAppearLater(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	create(t, reloaderConfig(ns, "early", []v1alpha1.Target{byName("Deployment", "web"), bySelector("Deployment", map[string]string{"reload": "yes"})},
		sourceNamed("ConfigMap", "late")))
	startReloader(t, ns)

	d := deployment(ns, "web", nil, podSpec())
	create(t, d)
	recorded(t, d)
	count := templateChanges(t, d)
	cm := configMap(ns, "late", map[string]string{"k": "v1"})
	create(t, cm)
	waitChanges(t, "source created", count, 0, d, cm)
	changeData(t, cm, "k", "v2")
	waitChanges(t, "created source changed", count, 1, d, cm)

	other := deployment(ns, "other", nil, podSpec())
	create(t, other)
	otherCount := templateChanges(t, other)
	update(t, other, func(o *appsv1.Deployment) { o.Labels = map[string]string{"reload": "yes"} })
	recorded(t, other)
	changeData(t, cm, "k", "v3")
	waitChanges(t, "web, after the relabel", count, 2, d, cm)
	waitChanges(t, "the relabelled workload", otherCount, 1, other, cm)
}

// A config's settings override the flags for its targets: the annotations strategy here.
// Two configs that disagree: the first by name wins, whatever order they come in.
func TestReloaderConfigOverrides(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", nil, podSpec("cfg"))
	b := reloaderConfig(ns, "b-env", []v1alpha1.Target{byName("Deployment", "web")}, sourceNamed("ConfigMap", "cfg"))
	b.Spec.Strategy = reload.StrategyEnvVars
	a := reloaderConfig(ns, "a-annotations", []v1alpha1.Target{byName("Deployment", "web")}, sourceNamed("ConfigMap", "cfg"))
	a.Spec.Strategy = reload.StrategyAnnotations
	create(t, cm, d, b, a)
	startReloader(t, ns)
	recorded(t, d)
	count := templateChanges(t, d)
	changeData(t, cm, "k", "v2")
	waitChanges(t, "change", count, 1, d, cm)
	w := get(t, d)
	if _, ok := w.Spec.Template.Annotations[reload.LastReloadedFrom]; !ok {
		t.Errorf("the annotations strategy of %s did not apply: template annotations %v", a.Name, w.Spec.Template.Annotations)
	}
	if _, ok := envOf(&w.Spec.Template, "app", "STAKATER_CFG_CONFIGMAP"); ok {
		t.Errorf("the env-vars strategy of %s applied, though %s comes first", b.Name, a.Name)
	}
}

// A config's keys restrict the sources it chooses: a change of another key rolls nothing;
// autoKeys takes the keys the pod spec reads.
func TestReloaderConfigKeys(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	listed := configMap(ns, "listed", map[string]string{"a": "1", "b": "1"})
	read := configMap(ns, "read", map[string]string{"a": "1", "b": "1"})
	tpl := podSpec("listed")
	tpl.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "read"}, Key: "a"}}}}
	d := deployment(ns, "web", nil, tpl)
	create(t, listed, read, d, reloaderConfig(ns, "keys", []v1alpha1.Target{byName("Deployment", "web")},
		v1alpha1.Source{Kind: "ConfigMap", Name: "listed", Keys: []string{"a"}},
		v1alpha1.Source{Kind: "ConfigMap", Auto: true, AutoKeys: true}))
	startReloader(t, ns)
	recorded(t, d)
	count := templateChanges(t, d)

	changeData(t, listed, "b", "2")
	changeData(t, read, "b", "2")
	waitChanges(t, "keys the rules leave out", count, 0, d, listed, read)
	changeData(t, listed, "a", "2")
	waitChanges(t, "a listed key", count, 1, d, listed)
	changeData(t, read, "a", "2")
	waitChanges(t, "a key the pod spec reads", count, 2, d, read)
}

// A source that gains the label a config selects is recorded at once, so its next change
// reloads (and one that loses it stops reloading).
func TestReloaderConfigSourceRelabelled(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "flags", map[string]string{"k": "v1"})
	d := deployment(ns, "web", nil, podSpec())
	create(t, cm, d, reloaderConfig(ns, "tiered", []v1alpha1.Target{byName("Deployment", "web")},
		v1alpha1.Source{Kind: "ConfigMap", Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "config"}}}))
	startReloader(t, ns)
	handled(t, d) // nothing concerns web yet: it has no record
	count := templateChanges(t, d)

	update(t, cm, func(c *corev1.ConfigMap) { c.Labels = map[string]string{"tier": "config"} })
	eventuallyRecorded(t, d, "configmap/flags", true)
	waitChanges(t, "label added", count, 0, d, cm)
	changeData(t, cm, "k", "v2")
	waitChanges(t, "change after the label", count, 1, d, cm)
}
