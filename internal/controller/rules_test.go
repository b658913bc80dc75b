package controller_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// Each case: a ConfigMap "cfg" used by container "app" (envFrom), a Secret "sec" used by
// container "sidecar" (valueFrom), one workload, one change. want names the container that
// must get the env var, or "" when the workload must not roll.
func TestTriggerRulesOverTheAPI(t *testing.T) {
	cmVar, secVar := "STAKATER_CFG_CONFIGMAP", "STAKATER_SEC_SECRET"
	tests := []struct {
		name        string
		opts        func(*options.Options)
		meta, tplAn map[string]string
		srcAn       map[string]string // annotations put on the changed source
		template    func() corev1.PodTemplateSpec
		change      string // "cfg" or "sec"
		want        string
		wantVar     string
	}{
		{name: "auto reloads on the secret, on the container using it", meta: map[string]string{auto: "true"}, change: "sec", want: "sidecar", wantVar: secVar},
		{name: "typed configmap auto ignores secrets", meta: map[string]string{"configmap.reloader.stakater.com/auto": "true"}, change: "sec"},
		{name: "typed secret auto", meta: map[string]string{"secret.reloader.stakater.com/auto": "true"}, change: "sec", want: "sidecar", wantVar: secVar},
		{name: "named regex, not referenced, goes to the first container",
			meta: map[string]string{"configmap.reloader.stakater.com/reload": "other,c.*g"}, change: "cfg", want: "app", wantVar: cmVar,
			template: func() corev1.PodTemplateSpec { return podSpec() }},
		{name: "named entry is anchored", meta: map[string]string{"configmap.reloader.stakater.com/reload": "cf"}, change: "cfg"},
		{name: "search with match", meta: map[string]string{"reloader.stakater.com/search": "true"}, srcAn: map[string]string{"reloader.stakater.com/match": "true"}, change: "cfg", want: "app", wantVar: cmVar},
		{name: "search without match", meta: map[string]string{"reloader.stakater.com/search": "true"}, change: "cfg"},
		{name: "source ignore annotation", meta: map[string]string{auto: "true"}, srcAn: map[string]string{"reloader.stakater.com/ignore": "true"}, change: "cfg"},
		{name: "exclude list", meta: map[string]string{auto: "true", "configmaps.exclude.reloader.stakater.com/reload": "cfg"}, change: "cfg"},
		{name: "pod template annotation fallback", tplAn: map[string]string{auto: "true"}, change: "cfg", want: "app", wantVar: cmVar},
		{name: "no annotation, no reload", change: "cfg"},
		{name: "auto-reload-all", opts: func(o *options.Options) { o.AutoReloadAll = true }, change: "cfg", want: "app", wantVar: cmVar},
		{name: "auto-reload-all, auto false opts out", opts: func(o *options.Options) { o.AutoReloadAll = true }, meta: map[string]string{auto: "false"}, change: "cfg"},
		{name: "renamed auto annotation", opts: func(o *options.Options) { o.Keys.Auto = "example.com/auto" }, meta: map[string]string{"example.com/auto": "true"}, change: "cfg", want: "app", wantVar: cmVar},
		{name: "old key is not read after a rename", opts: func(o *options.Options) { o.Keys.Auto = "example.com/auto" }, meta: map[string]string{auto: "true"}, change: "cfg"},
		{name: "resources-to-ignore secrets", opts: func(o *options.Options) { o.ResourcesToIgnore = []string{"secrets"} }, meta: map[string]string{auto: "true"}, change: "sec"},
		{name: "init container only goes to the first container", meta: map[string]string{auto: "true"}, change: "cfg", want: "app", wantVar: cmVar,
			template: func() corev1.PodTemplateSpec {
				tpl := podSpec()
				tpl.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}
				return tpl
			}},
		{name: "projected volume goes to the container mounting it", meta: map[string]string{auto: "true"}, change: "cfg", want: "sidecar", wantVar: cmVar,
			template: func() corev1.PodTemplateSpec {
				tpl := podSpec()
				tpl.Spec.Volumes = []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}}}
				tpl.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "p", MountPath: "/p"}}
				return tpl
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t)
			cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
			s := secret(ns, "sec", map[string]string{"p": "x"})
			tpl := podSpec("cfg")
			tpl.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "P", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "p"}}}}
			if tt.template != nil {
				tpl = tt.template()
			}
			tpl.Annotations = tt.tplAn
			if tt.change == "cfg" {
				cm.Annotations = tt.srcAn
			} else {
				s.Annotations = tt.srcAn
			}
			d := deployment(ns, "web", tt.meta, tpl)
			create(t, cm, s, d)
			configure := func(*options.Options) {}
			if tt.opts != nil {
				configure = tt.opts
			}
			startReloader(t, ns, configure)
			handled(t, d) // first sight is recorded (or, with no rule, nothing is)
			changes := templateChanges(t, d)

			if tt.change == "cfg" {
				update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
			} else {
				update(t, s, func(c *corev1.Secret) { c.Data["p"] = []byte("y") })
			}

			if tt.want == "" {
				handled(t, d, cm, s)
				if n := changes(); n != 0 {
					t.Fatalf("workload rolled (%d template changes), want no reload", n)
				}
				return
			}
			testutil.Eventually(t, "env var on "+tt.want, func() error {
				got := get(t, d)
				if _, ok := envOf(&got.Spec.Template, tt.want, tt.wantVar); !ok {
					return fmt.Errorf("no %s on %s: %+v", tt.wantVar, tt.want, got.Spec.Template.Spec.Containers)
				}
				return nil
			})
			got := get(t, d)
			for _, c := range got.Spec.Template.Spec.Containers {
				if _, ok := envOf(&got.Spec.Template, c.Name, tt.wantVar); ok && c.Name != tt.want {
					t.Errorf("env var also written to %s", c.Name)
				}
			}
			handled(t, d, cm, s)
			if n := changes(); n != 1 {
				t.Errorf("%d template changes, want 1", n)
			}
		})
	}
}

func TestAnnotationsStrategyWritesLastReloadedFrom(t *testing.T) {
	t.Parallel()
	ns, cm, d, _ := autoDeployment(t, func(o *options.Options) { o.ReloadStrategy = reload.StrategyAnnotations })
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })

	var last reload.LastReloaded
	testutil.Eventually(t, "last-reloaded-from annotation", func() error {
		v, ok := get(t, d).Spec.Template.Annotations[reload.LastReloadedFrom]
		if !ok {
			return fmt.Errorf("not written")
		}
		return json.Unmarshal([]byte(v), &last)
	})
	if last.Type != "CONFIGMAP" || last.Name != "cfg" || last.Namespace != ns || last.Hash == "" || !slices.Equal(last.ContainerRefs, []string{"app"}) || last.ObservedAt != 0 {
		t.Errorf("annotation = %+v", last)
	}
	for _, c := range get(t, d).Spec.Template.Spec.Containers {
		if len(c.Env) > 0 {
			t.Errorf("annotations strategy wrote env vars on %s: %v", c.Name, c.Env)
		}
	}
}

func TestOnlyTheWatchedNamespacesAreReloaded(t *testing.T) {
	t.Parallel()
	watched, other := newNamespace(t), newNamespace(t)
	for _, ns := range []string{watched, other} {
		create(t, configMap(ns, "cfg", map[string]string{"k": "v1"}), deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg")))
	}
	startReloader(t, watched)
	recorded(t, deployment(watched, "web", nil, podSpec()))
	otherChanges := templateChanges(t, deployment(other, "web", nil, podSpec()))
	for _, ns := range []string{watched, other} {
		update(t, configMap(ns, "cfg", nil), func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	}
	testutil.Eventually(t, "watched namespace reloaded", func() error {
		if _, ok := envOf(&get(t, deployment(watched, "web", nil, podSpec())).Spec.Template, "app", "STAKATER_CFG_CONFIGMAP"); !ok {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	// The other namespace has no reloader to handle its change: the watched one's handling of
	// its own is the sign that the change was out in time.
	handled(t, deployment(watched, "web", nil, podSpec()), configMap(watched, "cfg", nil))
	if n := otherChanges(); n != 0 {
		t.Errorf("workload outside --namespaces rolled %d times", n)
	}
	if _, ok := get(t, deployment(other, "web", nil, podSpec())).Annotations[reload.RecordAnnotation]; ok {
		t.Error("workload outside --namespaces was written to")
	}
}

func TestInvalidRegexIsReportedAndTheRestStillReloads(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	bad := deployment(ns, "bad", map[string]string{"configmap.reloader.stakater.com/reload": "cfg,broken-["}, podSpec())
	good := deployment(ns, "good", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, bad, good)
	startReloader(t, ns)
	eventuallyEvent(t, ns, "bad", controller.ReasonInvalidAnnotation)
	recorded(t, bad)
	recorded(t, good)
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	testutil.Eventually(t, "both reloaded", func() error {
		_, a := envOf(&get(t, bad).Spec.Template, "app", "STAKATER_CFG_CONFIGMAP")
		_, b := envOf(&get(t, good).Spec.Template, "app", "STAKATER_CFG_CONFIGMAP")
		if !a || !b {
			return fmt.Errorf("valid entry of the bad workload: %v, good workload: %v", a, b)
		}
		return nil
	})
}
