package controller_test

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// waitChanges waits until the workload w's pod template has changed want times, then until
// reloader has handled w and the objects written, and checks that it did not change it once
// more.
func waitChanges(t *testing.T, name string, changes func() int, want int, w client.Object, written ...client.Object) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("%s rolled %d times", name, want), func() error {
		if n := changes(); n < want {
			return fmt.Errorf("%d template changes", n)
		}
		return nil
	})
	handled(t, w, written...)
	if n := changes(); n != want {
		t.Errorf("%s: %d template changes, want %d", name, n, want)
	}
}

// TestKeysAnnotationReloadsOnlyOnListedKeys: with configmap.reloader.dev/keys: cfg/a, a change
// of key b rolls nothing, though the container reads the whole ConfigMap; a change of a rolls
// once. A bad entry beside it is reported and the valid one still applies.
func TestKeysAnnotationReloadsOnlyOnListedKeys(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1", "b": "1"})
	d := deployment(ns, "web", map[string]string{auto: "true", reload.ConfigMapKeysAnnotation: "cfg/a, Bad_Name/x"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)
	eventuallyEvent(t, ns, "web", controller.ReasonInvalidAnnotation)
	changes := templateChanges(t, d)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["b"] = "2" })
	handled(t, d, cm)
	if n := changes(); n != 0 {
		t.Fatalf("a change of an unlisted key rolled the workload (%d template changes)", n)
	}

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["a"] = "2" })
	waitChanges(t, "web", changes, 1, d, cm)
	v, _ := envOf(&get(t, d).Spec.Template, "app", cfgEnv)
	if hash.KeySet(v) == "" {
		t.Errorf("%s = %q, want the hash of the listed keys", cfgEnv, v)
	}
}

// TestUsedKeysOnly: with reloader.dev/used-keys-only, a workload reading key a through a
// configMapKeyRef, or file x.yaml through a projected volume's items, rolls on a change of that
// key only; one that also reads the ConfigMap whole through envFrom rolls on any key.
func TestUsedKeysOnly(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cfg := configMap(ns, "cfg", map[string]string{"a": "1", "b": "1"})
	files := configMap(ns, "files", map[string]string{"x.yaml": "1", "y.yaml": "1"})
	keyRef := corev1.EnvVar{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "a"}}}
	annotations := func() map[string]string {
		return map[string]string{auto: "true", reload.UsedKeysOnlyAnnotation: "true"}
	}

	byKeyRef := podSpec()
	byKeyRef.Spec.Containers[0].Env = []corev1.EnvVar{keyRef}
	projected := podSpec()
	projected.Spec.Volumes = []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: "files"},
			Items:                []corev1.KeyToPath{{Key: "x.yaml", Path: "x.yaml"}},
		}}},
	}}}}
	projected.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "conf", MountPath: "/conf"}}
	whole := podSpec()
	whole.Spec.Containers[0].Env = []corev1.EnvVar{keyRef}
	whole.Spec.Containers[1].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}

	ds := map[string]*appsv1.Deployment{
		"by-key-ref": deployment(ns, "by-key-ref", annotations(), byKeyRef),
		"projected":  deployment(ns, "projected", annotations(), projected),
		"whole":      deployment(ns, "whole", annotations(), whole),
	}
	create(t, cfg, files, ds["by-key-ref"], ds["projected"], ds["whole"])
	startReloader(t, ns)
	changes := map[string]func() int{}
	for name, d := range ds {
		recorded(t, d)
		changes[name] = templateChanges(t, d)
	}

	update(t, cfg, func(c *corev1.ConfigMap) { c.Data["b"] = "2" })
	update(t, files, func(c *corev1.ConfigMap) { c.Data["y.yaml"] = "2" })
	waitChanges(t, "whole", changes["whole"], 1, ds["whole"], cfg, files)
	for _, name := range []string{"by-key-ref", "projected"} {
		handled(t, ds[name], cfg, files)
		if n := changes[name](); n != 0 {
			t.Errorf("%s: a change of a key it does not read rolled it (%d template changes)", name, n)
		}
	}

	update(t, cfg, func(c *corev1.ConfigMap) { c.Data["a"] = "2" })
	update(t, files, func(c *corev1.ConfigMap) { c.Data["x.yaml"] = "2" })
	waitChanges(t, "by-key-ref", changes["by-key-ref"], 1, ds["by-key-ref"], cfg, files)
	waitChanges(t, "projected", changes["projected"], 1, ds["projected"], cfg, files)
	waitChanges(t, "whole", changes["whole"], 2, ds["whole"], cfg, files)
}

// TestSecretKeysAnnotation: a Secret restricted to its password key reloads on a password
// change, not on a user change; the recorded hash keeps the install key's ID, so a key change
// is re-based as for whole Secrets.
func TestSecretKeysAnnotation(t *testing.T) {
	t.Parallel()
	ns, s, d := secretDeployment(t, map[string]string{reload.SecretKeysAnnotation: "db/password"})
	update(t, s, func(s *corev1.Secret) { s.Data["user"] = []byte("app") })
	startReloader(t, ns, ownNamespace(ns))
	recorded(t, d)
	changes := templateChanges(t, d)
	recordedHash := recordOf(t, d)["secret/db"]
	if _, keyed := hash.KeyID(recordedHash); !keyed || hash.KeySet(recordedHash) == "" {
		t.Fatalf("recorded %q, want a keyed hash of a key subset", recordedHash)
	}

	update(t, s, func(s *corev1.Secret) { s.Data["user"] = []byte("root") })
	handled(t, d, s)
	if n := changes(); n != 0 {
		t.Fatalf("a change of the unlisted user key rolled the workload (%d template changes)", n)
	}
	if got := recordOf(t, d)["secret/db"]; got != recordedHash {
		t.Errorf("record moved from %q to %q", recordedHash, got)
	}

	update(t, s, func(s *corev1.Secret) { s.Data["password"] = []byte("hunter3") })
	waitChanges(t, "web", changes, 1, d, s)
	v, _ := envOf(&get(t, d).Spec.Template, "app", secretEnv)
	if id, _ := hash.KeyID(v); !strings.HasPrefix(recordedHash, id+":") || v == recordedHash {
		t.Errorf("%s = %q after the change, recorded before %q", secretEnv, v, recordedHash)
	}
}

// TestEditingKeysRollsNothing: adding, changing and removing the keys annotation re-records
// the workload's hash without a rollout, even when the keys newly listed changed meanwhile; a
// later change of a listed key rolls it once.
func TestEditingKeysRollsNothing(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1", "b": "1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)
	changes := templateChanges(t, d)

	setKeys := func(v string) string {
		before := recordOf(t, d)["configmap/cfg"]
		update(t, d, func(d *appsv1.Deployment) {
			if v == "" {
				delete(d.Annotations, reload.ConfigMapKeysAnnotation)
			} else {
				d.Annotations[reload.ConfigMapKeysAnnotation] = v
			}
		})
		var now string
		testutil.Eventually(t, "record re-made for keys "+v, func() error {
			if now = recordOf(t, d)["configmap/cfg"]; now == before {
				return fmt.Errorf("record still %q", now)
			}
			return nil
		})
		return now
	}

	onlyA := setKeys("cfg/a")
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["b"] = "2" })
	handled(t, d, cm)
	onlyB := setKeys("cfg/b")
	if hash.KeySet(onlyA) == "" || hash.KeySet(onlyA) == hash.KeySet(onlyB) {
		t.Errorf("recorded %q, then %q: want two key sets", onlyA, onlyB)
	}
	setKeys("")
	setKeys("cfg/b")
	handled(t, d, cm)
	if n := changes(); n != 0 {
		t.Fatalf("editing the keys annotation rolled the workload (%d template changes)", n)
	}

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["b"] = "3" })
	waitChanges(t, "web", changes, 1, d, cm)
}
