package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

const secretEnv = "STAKATER_DB_SECRET"

// secretDeployment creates, in a new namespace, Secret "db" and Deployment "web" with the auto
// annotation reading it through envFrom. The hash key lives in the same namespace.
func secretDeployment(t *testing.T, annotations map[string]string) (ns string, s *corev1.Secret, d *appsv1.Deployment) {
	t.Helper()
	ns = newNamespace(t)
	s = secret(ns, "db", map[string]string{"password": "hunter2"})
	tpl := podSpec()
	tpl.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[auto] = "true"
	d = deployment(ns, "web", annotations, tpl)
	create(t, s, d)
	return ns, s, d
}

// ownNamespace keeps reloader's own objects (the hash key) in ns, as RELOADER_NAMESPACE does.
func ownNamespace(ns string) func(*options.Options) {
	return func(o *options.Options) { o.ReloaderNamespace = ns }
}

func recordOf(t *testing.T, d *appsv1.Deployment) reload.Record {
	t.Helper()
	v, _ := recordText(t, d)
	rec, err := reload.ParseRecord(v)
	testutil.Must(t, err)
	return rec
}

// waitEnv waits until the app container's env var for "db" has a value other than not.
func waitEnv(t *testing.T, d *appsv1.Deployment, not string) string {
	t.Helper()
	var v string
	testutil.Eventually(t, "env var "+secretEnv+" set", func() error {
		var ok bool
		v, ok = envOf(&get(t, d).Spec.Template, "app", secretEnv)
		if !ok || v == not {
			return fmt.Errorf("%s = %q", secretEnv, v)
		}
		return nil
	})
	return v
}

// TestSpoofedCacheMarkerStillReloads: the annotation earlier releases used to mark a cached
// object is only an annotation now; a ConfigMap that carries it (with a wrong hash) reloads
// its workload on change like any other.
func TestSpoofedCacheMarkerStillReloads(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "v1"})
	cm.Annotations = map[string]string{"reloader.dev/cached-content-hash": "0000"}
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)
	if got := recordOf(t, d)["configmap/cfg"]; got == "0000" {
		t.Fatalf("the spoofed hash was recorded: %q", got)
	}
	changes := templateChanges(t, d)

	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "v2" })
	testutil.Eventually(t, "reload after change", func() error {
		if _, ok := envOf(&get(t, d).Spec.Template, "app", "STAKATER_CFG_CONFIGMAP"); !ok {
			return fmt.Errorf("no env var")
		}
		return nil
	})
	handled(t, d, cm)
	if n := changes(); n != 1 {
		t.Errorf("%d template changes, want 1", n)
	}
}

// TestSecretRecreatedWithIdenticalDataReloadsNothing: a restore or a replace --force gives the
// Secret a new UID; the hash is over namespace, name and data, so nothing rolls. A real change
// afterwards rolls once.
func TestSecretRecreatedWithIdenticalDataReloadsNothing(t *testing.T) {
	t.Parallel()
	ns, s, d := secretDeployment(t, nil)
	startReloader(t, ns, ownNamespace(ns))
	recorded(t, d)
	changes := templateChanges(t, d)

	old := get(t, s).UID
	testutil.Must(t, k8s.Delete(context.Background(), s))
	again := secret(ns, "db", map[string]string{"password": "hunter2"})
	create(t, again)
	if get(t, again).UID == old {
		t.Fatal("re-created Secret kept its UID")
	}
	handled(t, d, again)
	if n := changes(); n != 0 {
		t.Fatalf("re-creating the Secret with identical data changed the template %d times", n)
	}

	update(t, again, func(s *corev1.Secret) { s.Data["password"] = []byte("hunter3") })
	v := waitEnv(t, d, "")
	handled(t, d, again)
	if n := changes(); n != 1 {
		t.Errorf("%d template changes after a real change, want 1", n)
	}
	if strings.Contains(v, "hunter") {
		t.Errorf("env var holds the data: %q", v)
	}
}

// TestKeyRotationReloadsNothing: with the key Secret deleted, the next start makes a new key;
// the recorded hashes of the old key are re-based without a rollout, and a change made after
// that still rolls once.
func TestKeyRotationReloadsNothing(t *testing.T) {
	t.Parallel()
	ns, s, d := secretDeployment(t, nil)
	stop := startReloader(t, ns, ownNamespace(ns))
	recorded(t, d)
	before := recordOf(t, d)["secret/db"]
	stop()
	changes := templateChanges(t, d)

	key := &corev1.Secret{}
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: hashkey.SecretName}, key))
	testutil.Must(t, k8s.Delete(context.Background(), key))
	startReloader(t, ns, ownNamespace(ns))
	var after string
	testutil.Eventually(t, "record re-based to the new key", func() error {
		after = recordOf(t, d)["secret/db"]
		oldID, _ := hash.KeyID(before)
		if newID, keyed := hash.KeyID(after); !keyed || newID == oldID {
			return fmt.Errorf("record %q, before rotation %q", after, before)
		}
		return nil
	})
	handled(t, d, s)
	if n := changes(); n != 0 {
		t.Fatalf("key rotation changed the template %d times", n)
	}

	update(t, s, func(s *corev1.Secret) { s.Data["password"] = []byte("hunter3") })
	waitEnv(t, d, "")
	handled(t, d, s)
	if n := changes(); n != 1 {
		t.Errorf("%d template changes after a real change, want 1", n)
	}
}

// TestUIDKeyedRecordUpgradedWithoutRollout: a workload recorded by a release that keyed Secret
// hashes by UID is upgraded in place when the content is the one applied, and reloaded once
// when the content changed while reloader was being upgraded.
func TestUIDKeyedRecordUpgradedWithoutRollout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name         string
		recordedData string
		wantRollouts int
	}{
		{"content as applied", "hunter2", 0},
		{"content changed during the upgrade", "old-password", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNamespace(t)
			s := secret(ns, "db", map[string]string{"password": "hunter2"})
			create(t, s)
			applied := get(t, s).DeepCopy()
			applied.Data = map[string][]byte{"password": []byte(tt.recordedData)}
			legacy := hash.UIDKeyedSecret(applied)
			rec := reload.Record{"secret/db": legacy}
			tpl := podSpec()
			tpl.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}
			tpl.Spec.Containers[0].Env = []corev1.EnvVar{{Name: secretEnv, Value: legacy}}
			d := deployment(ns, "web", map[string]string{auto: "true", reload.RecordAnnotation: rec.Encode()}, tpl)
			create(t, d)
			changes := templateChanges(t, d)

			startReloader(t, ns, ownNamespace(ns))
			testutil.Eventually(t, "record upgraded to a keyed hash", func() error {
				got := recordOf(t, d)["secret/db"]
				if _, keyed := hash.KeyID(got); !keyed {
					return fmt.Errorf("record %q", got)
				}
				return nil
			})
			handled(t, d)
			if n := changes(); n != tt.wantRollouts {
				t.Errorf("%d template changes, want %d", n, tt.wantRollouts)
			}
		})
	}
}

// TestEventsCarryNoSecretUID reads the Events of a Secret reload over the API: the related
// reference names the Secret, and nothing in any Event holds its UID or its data.
func TestEventsCarryNoSecretUID(t *testing.T) {
	t.Parallel()
	ns, s, d := secretDeployment(t, nil)
	logs := startLoggedReloader(t, ns)
	recorded(t, d)
	uid := string(get(t, s).UID)
	update(t, s, func(s *corev1.Secret) { s.Data["password"] = []byte("hunter3") })
	eventuallyEvent(t, ns, "web", "Reloaded")

	var list eventsv1.EventList
	testutil.Must(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	related := 0
	for _, e := range list.Items {
		b, err := json.Marshal(e)
		testutil.Must(t, err)
		if strings.Contains(string(b), uid) || strings.Contains(string(b), "hunter") {
			t.Errorf("Event %s (%s) carries the Secret's UID or data: %s", e.Name, e.Reason, b)
		}
		if r := e.Related; r != nil && r.Kind == "Secret" && r.Name == "db" && r.Namespace == ns && r.APIVersion == "v1" {
			related++
		}
	}
	if related == 0 {
		t.Errorf("no Event names Secret %s/db as related: %+v", ns, list.Items)
	}
	all := logs()
	if !strings.Contains(all, "reloaded") {
		t.Fatalf("no reload logged; the check below would prove nothing:\n%s", all)
	}
	for _, leak := range []string{uid, "hunter"} {
		if strings.Contains(all, leak) {
			t.Errorf("the log shows the Secret's UID or data (%s)", leak)
		}
	}
}

// startLoggedReloader runs reloader on ns, its own namespace, logging at the most verbose
// level into a buffer that the returned function reads.
func startLoggedReloader(t *testing.T, ns string) (logs func() string) {
	t.Helper()
	var mu sync.Mutex
	var buf strings.Builder
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		buf.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 4})
	opts := options.Default()
	opts.Namespaces, opts.ReloaderNamespace = []string{ns}, ns
	opts.MetricsAddr, opts.V2HealthAddr = "0", "0"
	opts.CoalesceWindow = 100 * time.Millisecond
	conf, err := options.Parse(opts)
	testutil.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := app.New(ctx, restConfig, conf, logger)
	testutil.Must(t, err)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}
