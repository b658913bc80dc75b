package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

const (
	pausePeriod = "deployment.reloader.stakater.com/pause-period"
	pausedAt    = "deployment.reloader.stakater.com/paused-at"
)

// A reload pauses the Deployment; changes during the period land in the template while it
// is paused; at the end it is resumed, even by a reloader that was not running at the start.
func TestPausePeriodPausesThenResumesAcrossARestart(t *testing.T) {
	// Alone: timed by reloader's windows.
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	d := deployment(ns, "web", map[string]string{auto: "true", pausePeriod: "4s"}, podSpec("cfg"))
	create(t, cm, d)
	stop := startReloader(t, ns)
	recorded(t, d)

	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "paused with the new template", func() error {
		cur := get(t, d)
		if !cur.Spec.Paused || cur.Annotations[pausedAt] == "" {
			return fmt.Errorf("paused=%v paused-at=%q", cur.Spec.Paused, cur.Annotations[pausedAt])
		}
		return hasEnv(&cur.Spec.Template, cfgEnv)
	})
	first, _ := envOf(&get(t, d).Spec.Template, "app", cfgEnv)
	changeConfig(t, cm, "v3")
	testutil.Eventually(t, "second change applied while paused", func() error {
		cur := get(t, d)
		if v, _ := envOf(&cur.Spec.Template, "app", cfgEnv); v == first {
			return fmt.Errorf("template not updated")
		}
		if !cur.Spec.Paused {
			return fmt.Errorf("resumed early")
		}
		return nil
	})

	stop()
	startReloader(t, ns)
	testutil.Eventually(t, "resumed by the new reloader", func() error {
		cur := get(t, d)
		if cur.Spec.Paused || cur.Annotations[pausedAt] != "" {
			return fmt.Errorf("paused=%v paused-at=%q", cur.Spec.Paused, cur.Annotations[pausedAt])
		}
		return nil
	})
	eventuallyEvent(t, ns, "web", controller.ReasonResumed)
}

// A Deployment its user paused is reloaded but never resumed by reloader; a bad period is
// reported and the reload happens without a pause.
func TestPausePeriodLeavesUserPausesAloneAndReportsBadPeriods(t *testing.T) {
	// Alone: timed by reloader's windows.
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	userPaused := deployment(ns, "held", map[string]string{auto: "true", pausePeriod: "1s"}, podSpec("cfg"))
	userPaused.Spec.Paused = true
	bad := deployment(ns, "bad", map[string]string{auto: "true", pausePeriod: "soon"}, podSpec("cfg"))
	create(t, cm, userPaused, bad)
	startReloader(t, ns)
	recorded(t, userPaused)
	recorded(t, bad)

	changeConfig(t, cm, "v2")
	testutil.Eventually(t, "user-paused reloaded", func() error { return hasEnv(&get(t, userPaused).Spec.Template, cfgEnv) })
	testutil.Eventually(t, "bad period reloaded", func() error { return hasEnv(&get(t, bad).Spec.Template, cfgEnv) })
	eventuallyEvent(t, ns, "bad", controller.ReasonInvalidAnnotation)
	time.Sleep(2 * time.Second) // the subject: past the 1s period, when reloader resumes what it paused
	handled(t, userPaused, cm)
	handled(t, bad, cm)
	if cur := get(t, userPaused); !cur.Spec.Paused || cur.Annotations[pausedAt] != "" {
		t.Errorf("user's pause touched: paused=%v paused-at=%q", cur.Spec.Paused, cur.Annotations[pausedAt])
	}
	if get(t, bad).Spec.Paused {
		t.Error("paused despite an invalid period")
	}
}

// --reload-on-create reloads when a referenced source appears, but starting reloader over
// existing sources never reloads anything.
func TestReloadOnCreate(t *testing.T) {
	t.Parallel()
	for _, enabled := range []bool{true, false} {
		t.Run(fmt.Sprintf("enabled=%v", enabled), func(t *testing.T) {
			ns := newNamespace(t)
			existing := configMap(ns, "cfg", map[string]string{"k": "v1"})
			tpl := podSpec("cfg", "late")
			d := deployment(ns, "web", map[string]string{auto: "true"}, tpl)
			create(t, existing, d)
			changes := templateChanges(t, d)
			startReloader(t, ns, func(o *options.Options) { o.ReloadOnCreate = enabled })
			recorded(t, d)
			handled(t, d)
			if n := changes(); n != 0 {
				t.Fatalf("start-up changed the template %d times", n)
			}

			create(t, configMap(ns, "late", map[string]string{"k": "v1"}))
			if enabled {
				testutil.Eventually(t, "reloaded on create", func() error { return hasEnv(&get(t, d).Spec.Template, "STAKATER_LATE_CONFIGMAP") })
			} else {
				testutil.Eventually(t, "creation recorded", func() error {
					rec, _ := reload.ParseRecord(get(t, d).Annotations[reload.RecordAnnotation])
					if rec["configmap/late"] == "" {
						return fmt.Errorf("record %v", rec)
					}
					return nil
				})
			}
			handled(t, d, configMap(ns, "late", nil))
			want := 0
			if enabled {
				want = 1
			}
			if n := changes(); n != want {
				t.Errorf("template changed %d times, want %d", n, want)
			}
		})
	}
}

// --reload-on-delete removes the env var (env-vars strategy) or writes the delete marker
// (annotations strategy), once. Without it a deletion reloads nothing, and a re-created source
// reloads only if its content differs from what the pods last got.
func TestReloadOnDelete(t *testing.T) {
	t.Parallel()
	t.Run("env-vars", func(t *testing.T) {
		_, cm, d, _ := autoDeployment(t, func(o *options.Options) { o.ReloadOnDelete = true })
		changes := templateChanges(t, d)
		changeConfig(t, cm, "v2")
		testutil.Eventually(t, "reloaded", func() error { return hasEnv(&get(t, d).Spec.Template, cfgEnv) })
		testutil.Must(t, k8s.Delete(context.Background(), cm))
		testutil.Eventually(t, "env var removed", func() error {
			if hasEnv(&get(t, d).Spec.Template, cfgEnv) == nil {
				return fmt.Errorf("still set")
			}
			return nil
		})
		handled(t, d, cm)
		if n := changes(); n != 2 {
			t.Errorf("template changed %d times, want 2 (change, delete)", n)
		}
	})
	t.Run("annotations", func(t *testing.T) {
		_, cm, d, _ := autoDeployment(t, func(o *options.Options) {
			o.ReloadOnDelete = true
			o.ReloadStrategy = reload.StrategyAnnotations
		})
		testutil.Must(t, k8s.Delete(context.Background(), cm))
		testutil.Eventually(t, "delete marker", func() error {
			var got reload.LastReloaded
			v := get(t, d).Spec.Template.Annotations[reload.LastReloadedFrom]
			if err := json.Unmarshal([]byte(v), &got); err != nil {
				return fmt.Errorf("annotation %q: %v", v, err)
			}
			if got.Name != "cfg" || got.Hash != "" {
				return fmt.Errorf("annotation %+v", got)
			}
			return nil
		})
	})
	t.Run("off", func(t *testing.T) {
		ns, cm, d, _ := autoDeployment(t)
		changes := templateChanges(t, d)
		testutil.Must(t, k8s.Delete(context.Background(), cm))
		handled(t, d, cm)
		create(t, configMap(ns, "cfg", map[string]string{"k": "v1"}))
		handled(t, d, cm)
		if n := changes(); n != 0 {
			t.Fatalf("delete and identical re-create changed the template %d times", n)
		}
		testutil.Must(t, k8s.Delete(context.Background(), cm))
		handled(t, d, cm)
		create(t, configMap(ns, "cfg", map[string]string{"k": "v2"}))
		testutil.Eventually(t, "re-created with new content reloads", func() error { return hasEnv(&get(t, d).Spec.Template, cfgEnv) })
	})
}

func mountStatus(ns, pod, class, version string) *extapi.SecretProviderClassPodStatus {
	return &extapi.SecretProviderClassPodStatus{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod + "-" + ns + "-" + class},
		Status: extapi.SecretProviderClassPodStatusStatus{
			PodName: pod, SecretProviderClassName: class, Mounted: true,
			Objects: []extapi.SecretProviderClassObject{{ID: "secret/db-password", Version: version}},
		},
	}
}

func csiDeployment(ns, name, class string) *appsv1.Deployment {
	tpl := podSpec()
	tpl.Spec.Volumes = []corev1.Volume{{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
		Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": class},
	}}}}
	tpl.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "secrets", MountPath: "/mnt/secrets"}}
	return deployment(ns, name, map[string]string{auto: "true"}, tpl)
}

// A rotation reaches each pod's mount status at its own time; the workload reloads once. The
// secretproviderclass annotations select and exclude classes like the other kinds'.
func TestCSIRotationReloadsOncePerWorkload(t *testing.T) {
	// Alone: timed by reloader's windows.
	ns := newNamespace(t)
	d := csiDeployment(ns, "web", "vault")
	typed := csiDeployment(ns, "typed", "vault")
	typed.Annotations = map[string]string{"secretproviderclass.reloader.stakater.com/auto": "true"}
	named := deployment(ns, "named", map[string]string{"secretproviderclass.reloader.stakater.com/reload": "vault"}, podSpec())
	excluded := csiDeployment(ns, "excluded", "vault")
	excluded.Annotations["secretproviderclasses.exclude.reloader.stakater.com/reload"] = "vault"
	other := csiDeployment(ns, "other", "elsewhere")
	pods := []string{"web-1", "web-2", "web-3"}
	create(t, d, typed, named, excluded, other, mountStatus(ns, "other-1", "elsewhere", "v1"))
	for _, p := range pods {
		create(t, mountStatus(ns, p, "vault", "v1"))
	}
	startReloader(t, ns, func(o *options.Options) { o.EnableCSIIntegration = true })
	reloaded := []*appsv1.Deployment{d, typed, named}
	counts := map[string]func() int{}
	for _, w := range append(reloaded, other) {
		recorded(t, w)
	}
	for _, w := range append(reloaded, excluded, other) {
		counts[w.Name] = templateChanges(t, w)
	}

	for _, p := range pods {
		update(t, mountStatus(ns, p, "vault", ""), func(s *extapi.SecretProviderClassPodStatus) {
			s.Status.Objects[0].Version = "v2"
		})
		time.Sleep(500 * time.Millisecond) // the subject: rotations that reach the pods apart, each past the coalescing window
	}
	for _, w := range reloaded {
		testutil.Eventually(t, w.Name+" reloaded", func() error {
			return hasEnv(&get(t, w).Spec.Template, "STAKATER_VAULT_SECRETPROVIDERCLASS")
		})
	}
	var statuses []client.Object
	for _, p := range pods {
		statuses = append(statuses, mountStatus(ns, p, "vault", ""))
	}
	handledAll(t, []client.Object{d, typed, named, excluded, other}, statuses...)
	want := map[string]int{"web": 1, "typed": 1, "named": 1, "excluded": 0, "other": 0}
	for name, n := range want {
		if got := counts[name](); got != n {
			t.Errorf("%s: template changed %d times, want %d", name, got, n)
		}
	}
}
