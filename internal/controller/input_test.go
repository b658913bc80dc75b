package controller_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/options"
)

// A 200 KB reload annotation of patterns is ignored as a whole with an InvalidAnnotation
// Event; the workload's other rules keep working.
func TestOverSizeReloadAnnotation(t *testing.T) {
	ns := newNamespace(t)
	entry := strings.Repeat("(?:[a-z0-9]{999}x)", 12)
	hostile := strings.TrimSuffix(strings.Repeat(entry+",", (200<<10)/(len(entry)+1)), ",")
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true", "configmap.reloader.stakater.com/reload": hostile}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)
	eventuallyEvent(t, ns, "web", controller.ReasonInvalidAnnotation)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	eventually(t, "reloaded by the auto annotation", func() error { return hasEnv(&get(t, d).Spec.Template, cfgEnv) })
}

// A valid object name in a reload annotation names that object only: "app.config" does not
// match "app-config", and its creation counts for --reload-on-create.
func TestNamedEntryIsAName(t *testing.T) {
	ns := newNamespace(t)
	other := configMap(ns, "app-config", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{"configmap.reloader.stakater.com/reload": "app.config"}, podSpec())
	create(t, other, d)
	changes := templateChanges(t, d)
	startReloader(t, ns, func(o *options.Options) { o.ReloadOnCreate = true })
	recorded(t, d)

	update(t, other, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	settle()
	if n := changes(); n != 0 {
		t.Fatalf("a change of app-config rolled the workload %d times", n)
	}
	create(t, configMap(ns, "app.config", map[string]string{"k": "v1"}))
	eventually(t, "reloaded on creation of app.config", func() error {
		if n := changes(); n != 1 {
			return fmt.Errorf("template changed %d times", n)
		}
		return nil
	})
}
