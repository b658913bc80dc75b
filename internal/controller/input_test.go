package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// A 200 KB reload annotation of patterns is ignored as a whole with an InvalidAnnotation
// Event; the workload's other rules keep working.
func TestOverSizeReloadAnnotation(t *testing.T) {
	t.Parallel()
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
	testutil.Eventually(t, "reloaded by the auto annotation", func() error { return hasEnv(&get(t, d).Spec.Template, cfgEnv) })
}

// A valid object name in a reload annotation names that object only: "app.config" does not
// match "app-config", and its creation counts for --reload-on-create.
func TestNamedEntryIsAName(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	other := configMap(ns, "app-config", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{"configmap.reloader.stakater.com/reload": "app.config"}, podSpec())
	create(t, other, d)
	changes := templateChanges(t, d)
	startReloader(t, ns, func(o *options.Options) { o.ReloadOnCreate = true })
	recorded(t, d)

	update(t, other, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	handled(t, d, other)
	if n := changes(); n != 0 {
		t.Fatalf("a change of app-config rolled the workload %d times", n)
	}
	create(t, configMap(ns, "app.config", map[string]string{"k": "v1"}))
	testutil.Eventually(t, "reloaded on creation of app.config", func() error {
		if n := changes(); n != 1 {
			return fmt.Errorf("template changed %d times", n)
		}
		return nil
	})
}

// A ".*" rule over hundreds of ConfigMaps with long names: the record of their hashes would
// pass the API server's 256 KiB limit on annotations, and every patch would fail. Folded, it
// stays small, and a change still rolls the workload once.
func TestRecordOverManySources(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	const n = 900
	name := func(i int) string { return fmt.Sprintf("%s-%03d", strings.Repeat("c", 236), i) }
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				errs <- k8s.Create(context.Background(), configMap(ns, name(i), map[string]string{"k": "v1"}))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		testutil.Must(t, err)
	}
	d := deployment(ns, "web", map[string]string{"configmap.reloader.stakater.com/reload": ".*"}, podSpec())
	create(t, d)
	changes := templateChanges(t, d)
	startReloader(t, ns)
	recorded(t, d)
	if size := len(get(t, d).Annotations[reload.RecordAnnotation]); size > reload.MaxRecordBytes {
		t.Fatalf("record of %d sources is %d bytes", n, size)
	}

	changed := configMap(ns, name(417), nil)
	update(t, changed, func(c *corev1.ConfigMap) { c.Data = map[string]string{"k": "v2"} })
	testutil.Eventually(t, "reloaded", func() error {
		return hasEnv(&get(t, d).Spec.Template, reload.EnvVarName(source.ID{Kind: source.ConfigMap, Name: name(417)}))
	})
	handled(t, d, changed)
	if got := changes(); got != 1 {
		t.Errorf("template changed %d times, want 1", got)
	}
}
