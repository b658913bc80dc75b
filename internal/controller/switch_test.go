package controller_test

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// upstreamHash is the value upstream Reloader writes for a source: SHA-1 of its sorted
// key=value pairs joined by ";".
func upstreamHash(data map[string]string) string {
	pairs := make([]string, 0, len(data))
	for k, v := range data {
		pairs = append(pairs, k+"="+v)
	}
	slices.Sort(pairs)
	sum := sha1.Sum([]byte(strings.Join(pairs, ";")))
	return hex.EncodeToString(sum[:])
}

// Switching from upstream: the workloads carry what upstream wrote (its env vars with its
// hashes, or its last-reloaded-from annotation) and no record of reloader's. Starting
// reloader rolls nothing; the next change of a source rolls each workload using it exactly
// once, and upstream's env var is updated in place.
func TestSwitchFromUpstreamRollsNothingThenOncePerChange(t *testing.T) {
	t.Parallel()
	const (
		cmEnv     = "STAKATER_APP_CONFIG_CONFIGMAP"
		secretEnv = "STAKATER_DB_CREDS_SECRET"
	)
	for _, strategy := range []string{reload.StrategyEnvVars, reload.StrategyAnnotations} {
		t.Run(strategy, func(t *testing.T) {
			ns := newNamespace(t)
			cmData, secretData := map[string]string{"mode": "blue"}, map[string]string{"password": "hunter2"}
			cm := configMap(ns, "app-config", cmData)
			sec := secret(ns, "db-creds", secretData)
			// What upstream left on the pod template.
			tpl := podSpec("app-config")
			app := &tpl.Spec.Containers[0]
			app.EnvFrom = append(app.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db-creds"}}})
			if strategy == reload.StrategyEnvVars {
				app.Env = []corev1.EnvVar{{Name: cmEnv, Value: upstreamHash(cmData)}, {Name: secretEnv, Value: upstreamHash(secretData)}}
			} else {
				last, err := json.Marshal(map[string]any{"type": "CONFIGMAP", "name": "app-config", "namespace": ns,
					"hash": upstreamHash(cmData), "containerRefs": []string{"app"}, "observedAt": 1700000000})
				testutil.Must(t, err)
				tpl.Annotations = map[string]string{reload.LastReloadedFrom: string(last)}
			}
			d := deployment(ns, "web", map[string]string{auto: "true"}, tpl)
			sts := statefulSet(ns, "db", map[string]string{auto: "true"}, *tpl.DeepCopy())
			workloads := []client.Object{d, sts}
			create(t, cm, sec, d, sts)

			type state struct {
				generation int64
				template   string
			}
			read := func(o client.Object) (state, corev1.PodTemplateSpec) {
				cur := get(t, o)
				var tpl corev1.PodTemplateSpec
				b, err := json.Marshal(templateOf(cur))
				testutil.Must(t, err)
				testutil.Must(t, json.Unmarshal(b, &tpl))
				return state{cur.GetGeneration(), string(b)}, tpl
			}
			before := map[string]state{}
			changes := map[string]func() int{}
			for _, w := range workloads {
				before[w.GetName()], _ = read(w)
				changes[w.GetName()] = templateChanges(t, w)
			}

			startReloader(t, ns, func(o *options.Options) { o.ReloadStrategy = strategy })
			for _, w := range workloads {
				recorded(t, w)
			}
			for _, w := range workloads {
				handled(t, w)
			}
			for _, w := range workloads {
				now, tpl := read(w)
				if now.template != before[w.GetName()].template || changes[w.GetName()]() != 0 {
					t.Errorf("%s: start-up changed the pod template:\n%s\n->\n%s", w.GetName(), before[w.GetName()].template, now.template)
				}
				// The API server moves a Deployment's generation on any annotation change, the
				// record included; that rolls nothing. A StatefulSet's moves only with its spec.
				if _, isSts := w.(*appsv1.StatefulSet); isSts && now.generation != before[w.GetName()].generation {
					t.Errorf("%s: generation %d -> %d at start-up", w.GetName(), before[w.GetName()].generation, now.generation)
				}
				if strategy == reload.StrategyEnvVars {
					expectEnv(t, w.GetName(), &tpl, cmEnv, upstreamHash(cmData))
					expectEnv(t, w.GetName(), &tpl, secretEnv, upstreamHash(secretData))
				}
			}

			// The next change of each source rolls each workload once.
			update(t, cm, func(c *corev1.ConfigMap) { c.Data["mode"] = "green" })
			waitRollouts(t, workloads, changes, 1)
			for _, w := range workloads {
				_, tpl := read(w)
				if strategy == reload.StrategyEnvVars {
					newValue := expectEnv(t, w.GetName(), &tpl, cmEnv, "")
					if newValue == upstreamHash(cmData) || newValue == "" {
						t.Errorf("%s: %s not updated: %q", w.GetName(), cmEnv, newValue)
					}
					expectEnv(t, w.GetName(), &tpl, secretEnv, upstreamHash(secretData))
					continue
				}
				var last reload.LastReloaded
				testutil.Must(t, json.Unmarshal([]byte(tpl.Annotations[reload.LastReloadedFrom]), &last))
				if last.Name != "app-config" || last.Hash == upstreamHash(cmData) || last.Hash == "" {
					t.Errorf("%s: last-reloaded-from %+v", w.GetName(), last)
				}
			}

			update(t, sec, func(s *corev1.Secret) { s.Data["password"] = []byte("correct horse") })
			waitRollouts(t, workloads, changes, 2)
			if strategy == reload.StrategyEnvVars {
				for _, w := range workloads {
					_, tpl := read(w)
					if v := expectEnv(t, w.GetName(), &tpl, secretEnv, ""); v == upstreamHash(secretData) {
						t.Errorf("%s: %s not updated", w.GetName(), secretEnv)
					}
				}
			}
		})
	}
}

func templateOf(o client.Object) *corev1.PodTemplateSpec {
	switch w := o.(type) {
	case *appsv1.Deployment:
		return &w.Spec.Template
	case *appsv1.StatefulSet:
		return &w.Spec.Template
	case *appsv1.DaemonSet:
		return &w.Spec.Template
	}
	panic(fmt.Sprintf("no template in %T", o))
}

// waitRollouts waits until every workload's template has changed want times, and checks
// that it stays so.
func waitRollouts(t *testing.T, workloads []client.Object, changes map[string]func() int, want int) {
	t.Helper()
	for _, w := range workloads {
		testutil.Eventually(t, fmt.Sprintf("%s rolled %d times", w.GetName(), want), func() error {
			if n := changes[w.GetName()](); n != want {
				return fmt.Errorf("%d template changes", n)
			}
			return nil
		})
	}
	for _, w := range workloads {
		handled(t, w)
	}
	for _, w := range workloads {
		if n := changes[w.GetName()](); n != want {
			t.Errorf("%s: %d template changes, want %d", w.GetName(), n, want)
		}
	}
}

// expectEnv checks that the app container has exactly one env var name, with value unless
// value is empty, and returns its value.
func expectEnv(t *testing.T, workload string, tpl *corev1.PodTemplateSpec, name, value string) string {
	t.Helper()
	var found []string
	for _, c := range tpl.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == name {
				found = append(found, c.Name+"="+e.Value)
			}
		}
	}
	if len(found) != 1 || !strings.HasPrefix(found[0], "app=") {
		t.Errorf("%s: %s set %v, want once on app", workload, name, found)
		return ""
	}
	got := strings.TrimPrefix(found[0], "app=")
	if value != "" && got != value {
		t.Errorf("%s: %s = %s, want %s", workload, name, got, value)
	}
	return got
}
