package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the output")

// One real kube-apiserver + etcd for the package; each test uses namespaces of its own.
var (
	cluster *testenv.Cluster
	k8s     client.Client
)

func TestMain(m *testing.M) {
	flag.Parse()
	var err error
	cluster, err = testenv.Start(context.Background(), testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join("..", "..", "deployments", "chart", "reloader", "files", "crds"), filepath.Join("..", "..", "test", "crds")},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		os.Exit(1)
	}
	scheme, err := app.NewScheme()
	if err == nil {
		k8s, err = client.New(cluster.Config, client.Options{Scheme: scheme})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = cluster.Stop()
	os.Exit(code)
}

// fixedKey is the test install's Secret hash key, so that Secret hashes are stable.
var fixedKey = bytes.Repeat([]byte{7}, hash.KeySize)

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		testutil.Must(t, k8s.Create(context.Background(), o))
	}
}

func namespace(t *testing.T, name string) {
	t.Helper()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

// keySecret installs the fixed hash key in ns, as reloader would have.
func keySecret(t *testing.T, ns string) hash.Key {
	t.Helper()
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hashkey.SecretName},
		Data: map[string][]byte{"key": fixedKey}})
	k, err := hash.NewKey(fixedKey)
	testutil.Must(t, err)
	return k
}

func configMap(ns, name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": value}}
}

func secret(ns, name, value string, annotations map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Data: map[string][]byte{"password": []byte(value)}}
}

// podSpec has one container reading the ConfigMaps and Secrets through envFrom.
func podSpec(configMaps, secrets []string) corev1.PodTemplateSpec {
	c := corev1.Container{Name: "app", Image: "busybox"}
	for _, cm := range configMaps {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}})
	}
	for _, s := range secrets {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: s}}})
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "test"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
	}
}

func jobPodSpec(configMaps, secrets []string) corev1.PodTemplateSpec {
	tpl := podSpec(configMaps, secrets)
	tpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	return tpl
}

func deployment(ns, name string, annotations map[string]string, tpl corev1.PodTemplateSpec) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: tpl.Labels}, Template: tpl},
	}
}

// pausedDeployment is a Deployment that reloader paused.
func pausedDeployment(ns, name string, annotations map[string]string, tpl corev1.PodTemplateSpec) *appsv1.Deployment {
	d := deployment(ns, name, annotations, tpl)
	d.Spec.Paused = true
	return d
}

// withRecord adds to annotations the record reloader writes after applying these hashes.
func withRecord(annotations map[string]string, hashes reload.Record) map[string]string {
	out := map[string]string{reload.RecordAnnotation: hashes.Encode()}
	for k, v := range annotations {
		out[k] = v
	}
	return out
}

func testConf(t *testing.T, configure ...func(*options.Options)) options.Config {
	t.Helper()
	o := options.Default()
	o.CoalesceWindow = 0
	for _, c := range configure {
		c(&o)
	}
	conf, err := options.Parse(o)
	testutil.Must(t, err)
	return conf
}

func explainer(t *testing.T, conf options.Config, ns, keyNamespace string) *Explainer {
	t.Helper()
	e, err := New(context.Background(), cluster.Config, conf, ns, keyNamespace)
	testutil.Must(t, err)
	return e
}

var times = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

// golden compares the text output with testdata/name.golden, times normalized; -update
// rewrites the file.
func golden(t *testing.T, name string, report interface{ WriteText(w io.Writer) error }) {
	t.Helper()
	var buf bytes.Buffer
	testutil.Must(t, report.WriteText(&buf))
	got := times.ReplaceAll(buf.Bytes(), []byte("<time>"))
	path := filepath.Join("testdata", name+".golden")
	if *update {
		testutil.Must(t, os.MkdirAll("testdata", 0o755))
		testutil.Must(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	testutil.Must(t, err)
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (run with -update to accept):\n%s", name, path, got)
	}
}

// shop is the namespace of the golden tests: a changed ConfigMap, an unchanged one, a Secret
// with the ignore annotation, and workloads recorded as reloader would have recorded them.
func shop(t *testing.T) (ns string, key hash.Key) {
	t.Helper()
	ns = "shop"
	namespace(t, ns)
	namespace(t, "reloader")
	key = keySecret(t, "reloader")

	cfgBefore := configMap(ns, "cfg", "v1")
	cfg, other := configMap(ns, "cfg", "v2"), configMap(ns, "other", "v1")
	db := secret(ns, "db", "hunter2", nil)
	dbBefore := secret(ns, "db", "hunter1", nil)
	muted := secret(ns, "muted", "s3cret", map[string]string{"reloader.stakater.com/ignore": "true"})
	create(t, cfg, other, db, muted)

	auto := map[string]string{"reloader.stakater.com/auto": "true"}
	create(t,
		deployment(ns, "web", withRecord(auto, reload.Record{"configmap/cfg": hash.ConfigMap(cfgBefore)}), podSpec([]string{"cfg"}, nil)),
		deployment(ns, "fresh", withRecord(auto, reload.Record{"configmap/other": hash.ConfigMap(other)}), podSpec([]string{"other"}, nil)),
		deployment(ns, "excluded", withRecord(map[string]string{
			"reloader.stakater.com/auto":                      "true",
			"configmaps.exclude.reloader.stakater.com/reload": "cfg",
		}, reload.Record{"configmap/other": hash.ConfigMap(other)}), podSpec([]string{"cfg", "other"}, nil)),
		deployment(ns, "ignored", withRecord(auto, reload.Record{"configmap/other": hash.ConfigMap(other)}), podSpec([]string{"other"}, []string{"muted"})),
		deployment(ns, "missing", withRecord(map[string]string{"configmap.reloader.stakater.com/reload": "absent,cfg"},
			reload.Record{"configmap/absent": reload.Absent, "configmap/cfg": hash.ConfigMap(cfg)}), podSpec(nil, nil)),
		deployment(ns, "new", auto, podSpec([]string{"cfg"}, nil)),
		deployment(ns, "keyed", map[string]string{"reloader.stakater.com/auto": "true", reload.ConfigMapKeysAnnotation: "other/k"},
			podSpec([]string{"other"}, nil)),
		pausedDeployment(ns, "paused", withRecord(map[string]string{
			"reloader.stakater.com/auto":                    "true",
			"deployment.reloader.stakater.com/pause-period": "1h",
			"deployment.reloader.stakater.com/paused-at":    time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339),
		}, reload.Record{"configmap/cfg": hash.ConfigMap(cfgBefore)}), podSpec([]string{"cfg"}, nil)),
		deployment(ns, "unannotated", withRecord(nil, reload.Record{"configmap/cfg": hash.ConfigMap(cfgBefore)}), podSpec([]string{"other"}, nil)),
		&v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-rules"},
			Spec: v1alpha1.ReloaderConfigSpec{
				Targets:  []v1alpha1.Target{{Kind: "Deployment", Name: "unannotated"}},
				Sources:  []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg"}, {Kind: "Secret", Name: "muted"}},
				Strategy: "annotations",
			}},
		// A second config for the same target, with another strategy: a conflict to report.
		&v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-strategy"},
			Spec: v1alpha1.ReloaderConfigSpec{
				Targets:  []v1alpha1.Target{{Kind: "Deployment", Name: "unannotated"}},
				Sources:  []v1alpha1.Source{{Kind: "ConfigMap", Name: "cfg"}},
				Strategy: "env-vars",
			}},
		&batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly", Annotations: withRecord(
				map[string]string{"secret.reloader.stakater.com/reload": "db,muted"},
				reload.Record{"secret/db": hash.Secret(key, dbBefore)})},
			Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{Template: jobPodSpec(nil, []string{"db"})}}},
		},
	)
	return ns, key
}

func TestExplain(t *testing.T) {
	ns, _ := shop(t)
	e := explainer(t, testConf(t), ns, "reloader")
	ctx := context.Background()

	for _, tt := range []struct {
		golden string
		kind   workload.Kind
		name   string
		action string
	}{
		{"auto-changed", workload.Deployment(), "web", ActionReload},
		{"up-to-date", workload.Deployment(), "fresh", ActionNothing},
		{"excluded-source", workload.Deployment(), "excluded", ActionNothing},
		{"ignored-source", workload.Deployment(), "ignored", ActionNothing},
		{"named-missing", workload.Deployment(), "missing", ActionNothing},
		{"first-seen", workload.Deployment(), "new", ActionRecord},
		{"keys", workload.Deployment(), "keyed", ActionRecord},
		{"cronjob", workload.CronJob(), "nightly", ActionReload},
		{"paused", workload.Deployment(), "paused", ActionReload},
		{"reloaderconfig", workload.Deployment(), "unannotated", ActionReload},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			w, err := e.Workload(ctx, tt.kind, tt.name)
			testutil.Must(t, err)
			if w.Next.Action != tt.action {
				t.Errorf("next action %q, want %q: %s", w.Next.Action, tt.action, w.Next.Why)
			}
			golden(t, tt.golden, w)
		})
	}

	t.Run("paused until", func(t *testing.T) {
		w, err := e.Workload(ctx, workload.Deployment(), "paused")
		testutil.Must(t, err)
		if p := w.Next.PausedUntil; p == nil || time.Until(*p) < 49*time.Minute || time.Until(*p) > 51*time.Minute {
			t.Errorf("paused until %v, want 50 minutes from now", p)
		}
	})

	t.Run("configmap", func(t *testing.T) {
		s, err := e.Source(ctx, "configmap", "cfg")
		testutil.Must(t, err)
		golden(t, "configmap-cfg", s)
		var names []string
		for _, w := range s.Workloads {
			names = append(names, w.Kind+"/"+w.Name)
		}
		// "excluded" references cfg but excludes it: a change of cfg must not list it.
		if want := []string{"Deployment/missing", "Deployment/new", "Deployment/paused", "Deployment/unannotated", "Deployment/web"}; fmt.Sprint(names) != fmt.Sprint(want) {
			t.Errorf("workloads %v, want %v", names, want)
		}
	})

	t.Run("json", func(t *testing.T) {
		w, err := e.Workload(ctx, workload.Deployment(), "web")
		testutil.Must(t, err)
		b, err := json.Marshal(w)
		testutil.Must(t, err)
		var back Workload
		testutil.Must(t, json.Unmarshal(b, &back))
		if back.Next.Action != ActionReload || fmt.Sprint(back.Next.Sources) != "[configmap/cfg]" {
			t.Errorf("next %+v, want reload of configmap/cfg", back.Next)
		}
		if len(back.Sources) != 1 || back.Sources[0].State != StateChanged || back.Sources[0].Hash != hash.ConfigMap(configMap(ns, "cfg", "v2")) ||
			back.Sources[0].Recorded != hash.ConfigMap(configMap(ns, "cfg", "v1")) || back.Sources[0].Reason != string(reload.ReasonAuto) {
			t.Errorf("sources %+v", back.Sources)
		}
		var fields map[string]any
		testutil.Must(t, json.Unmarshal(b, &fields))
		for _, k := range []string{"kind", "namespace", "name", "sources", "next", "events"} {
			if _, ok := fields[k]; !ok {
				t.Errorf("JSON has no %q: %s", k, b)
			}
		}
	})

	t.Run("unreadable key", func(t *testing.T) {
		w, err := explainer(t, testConf(t), ns, "nowhere").Workload(ctx, workload.CronJob(), "nightly")
		testutil.Must(t, err)
		golden(t, "cronjob-no-key", w)
	})

	t.Run("coalescing", func(t *testing.T) {
		conf := testConf(t, func(o *options.Options) { o.CoalesceWindow = time.Hour })
		w, err := explainer(t, conf, ns, "reloader").Workload(ctx, workload.Deployment(), "web")
		testutil.Must(t, err)
		wait, err := time.ParseDuration(w.Next.Wait)
		if w.Next.Action != ActionWait || err != nil || wait <= 50*time.Minute || wait > time.Hour {
			t.Errorf("next %+v, want a wait of nearly an hour", w.Next)
		}
	})

	t.Run("renamed annotation", func(t *testing.T) {
		create(t, deployment(ns, "renamed", map[string]string{"example.com/auto": "true"}, podSpec([]string{"cfg"}, nil)))
		conf := testConf(t, func(o *options.Options) { o.Keys.Auto = "example.com/auto" })
		w, err := explainer(t, conf, ns, "reloader").Workload(ctx, workload.Deployment(), "renamed")
		testutil.Must(t, err)
		if len(w.Sources) != 1 || !w.Sources[0].Reloads || w.Sources[0].Reason != string(reload.ReasonAuto) {
			t.Errorf("sources %+v, want cfg through the renamed auto annotation", w.Sources)
		}
		w, err = e.Workload(ctx, workload.Deployment(), "renamed")
		testutil.Must(t, err)
		if len(w.Sources) != 1 || w.Sources[0].Reloads {
			t.Errorf("with the default annotation names, sources %+v, want cfg not reloading", w.Sources)
		}
	})

	t.Run("ignored source kind", func(t *testing.T) {
		conf := testConf(t, func(o *options.Options) { o.ResourcesToIgnore = []string{"secrets"} })
		w, err := explainer(t, conf, ns, "reloader").Workload(ctx, workload.CronJob(), "nightly")
		testutil.Must(t, err)
		if w.Next.Action != ActionNothing || len(w.Sources) != 2 || w.Sources[0].Reason != string(reload.ReasonKindIgnored) {
			t.Errorf("explained as %+v, want secret/db ignored by kind and nothing to do", w)
		}
	})

	t.Run("ignored workload type", func(t *testing.T) {
		conf := testConf(t, func(o *options.Options) { o.IgnoredWorkloadTypes = []string{"cronjobs"} })
		w, err := explainer(t, conf, ns, "reloader").Workload(ctx, workload.CronJob(), "nightly")
		testutil.Must(t, err)
		if w.Next.Action != ActionIgnored {
			t.Errorf("next %+v, want ignored", w.Next)
		}
	})

	t.Run("finished-job", func(t *testing.T) {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate", Annotations: withRecord(map[string]string{
				"reloader.stakater.com/auto":      "true",
				reload.RecreateFinishedAnnotation: "false",
			}, reload.Record{"configmap/cfg": hash.ConfigMap(configMap(ns, "cfg", "v1"))})},
			Spec: batchv1.JobSpec{Template: jobPodSpec([]string{"cfg"}, nil)},
		}
		create(t, j)
		now := metav1.Now()
		j.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}}
		testutil.Must(t, k8s.Status().Update(ctx, j))
		w, err := e.Workload(ctx, workload.Job(), "migrate")
		testutil.Must(t, err)
		if w.Next.Action != ActionSkip {
			t.Errorf("next %+v, want skip", w.Next)
		}
		golden(t, "finished-job", w)
	})

	t.Run("invalid annotation", func(t *testing.T) {
		create(t, deployment(ns, "typo", map[string]string{"reloader.stakater.com/auto": "yes"}, podSpec([]string{"cfg"}, nil)))
		w, err := e.Workload(ctx, workload.Deployment(), "typo")
		testutil.Must(t, err)
		if len(w.Notes) != 1 || !strings.Contains(w.Notes[0], `reloader.stakater.com/auto: "yes" is not true or false`) || w.Sources[0].Reloads {
			t.Errorf("explained as %+v, want a note on the bad value and cfg not reloading", w)
		}
	})

	t.Run("rollout", func(t *testing.T) {
		// A Rollout that runs Deployment web's template: its sources are that template's.
		create(t, &extapi.Rollout{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "canary", Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
			Spec:       extapi.RolloutSpec{WorkloadRef: &extapi.WorkloadRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
		})
		conf := testConf(t, func(o *options.Options) { o.IsArgoRollouts = true })
		w, err := explainer(t, conf, ns, "reloader").Workload(ctx, workload.Rollout(), "canary")
		testutil.Must(t, err)
		if w.Next.Action != ActionRecord || len(w.Sources) != 1 || w.Sources[0].Name != "cfg" || !w.Sources[0].Reloads {
			t.Errorf("explained as %+v, want cfg through web's template, recorded first", w)
		}
		w, err = e.Workload(ctx, workload.Rollout(), "canary")
		testutil.Must(t, err)
		if w.Next.Action != ActionIgnored {
			t.Errorf("without --is-Argo-Rollouts, next %+v, want ignored", w.Next)
		}
	})

	t.Run("csi", func(t *testing.T) {
		tpl := podSpec(nil, nil)
		tpl.Spec.Volumes = []corev1.Volume{{Name: "vault", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": "vault-db"}}}}}
		create(t,
			deployment(ns, "vaulted", withRecord(map[string]string{"reloader.stakater.com/auto": "true"},
				reload.Record{"secretproviderclass/vault-db": hash.Versions([]string{"db=1"})}), tpl),
			&extapi.SecretProviderClassPodStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vaulted-pod-vault"},
				Status: extapi.SecretProviderClassPodStatusStatus{SecretProviderClassName: "vault-db", Mounted: true,
					Objects: []extapi.SecretProviderClassObject{{ID: "db", Version: "2"}}}},
		)
		conf := testConf(t, func(o *options.Options) { o.EnableCSIIntegration = true })
		w, err := explainer(t, conf, ns, "reloader").Workload(ctx, workload.Deployment(), "vaulted")
		testutil.Must(t, err)
		if w.Next.Action != ActionReload || fmt.Sprint(w.Next.Sources) != "[secretproviderclass/vault-db]" {
			t.Errorf("explained as %+v, want a reload of the CSI secret", w)
		}
		w, err = e.Workload(ctx, workload.Deployment(), "vaulted")
		testutil.Must(t, err)
		if w.Next.Action != ActionNothing || len(w.Sources) != 0 {
			t.Errorf("without --enable-csi-integration, explained as %+v, want no source", w)
		}
	})

	t.Run("folded record", func(t *testing.T) {
		// A record past the annotation budget is stored as bucket sums, as reloader stores it.
		// Its 2000 other sources are gone: a folded record can't tell that from a change of
		// its members, and the controller reloads rather than miss one; explain says so.
		big := reload.Record{"configmap/cfg": hash.ConfigMap(configMap(ns, "cfg", "v2"))}
		for i := range 2000 {
			big[fmt.Sprintf("configmap/gone-%04d", i)] = hash.ConfigMap(configMap(ns, "gone", fmt.Sprint(i)))
		}
		create(t, deployment(ns, "crowded", map[string]string{
			"reloader.stakater.com/auto": "true", reload.RecordAnnotation: big.Encode()}, podSpec([]string{"cfg"}, nil)))
		w, err := e.Workload(ctx, workload.Deployment(), "crowded")
		testutil.Must(t, err)
		if len(w.Sources) != 1 || w.Sources[0].State != StateChanged || w.Sources[0].Recorded != "(folded)" || w.Next.Action != ActionReload {
			t.Errorf("explained as %+v, want cfg changed in a folded record", w)
		}
	})

	t.Run("folded record unchanged", func(t *testing.T) {
		bulk := "bulk"
		namespace(t, bulk)
		rec := reload.Record{}
		for i := range 450 {
			cm := configMap(bulk, fmt.Sprintf("bulk-%03d", i), "v1")
			create(t, cm)
			rec["configmap/"+cm.Name] = hash.ConfigMap(cm)
		}
		if enc := rec.Encode(); len(enc) > reload.MaxRecordBytes || !folded(mustParse(t, enc)) {
			t.Fatalf("record of %d bytes is not folded", len(enc))
		}
		create(t, deployment(bulk, "all", map[string]string{
			"configmap.reloader.stakater.com/reload": "bulk-.*", reload.RecordAnnotation: rec.Encode()}, podSpec(nil, nil)))
		w, err := explainer(t, testConf(t), bulk, "reloader").Workload(ctx, workload.Deployment(), "all")
		testutil.Must(t, err)
		if len(w.Sources) != 450 || w.Sources[0].State != StateFolded || w.Next.Action != ActionNothing {
			t.Errorf("%d sources, first %+v, next %+v; want 450 in a folded record, nothing to do", len(w.Sources), w.Sources[0], w.Next)
		}
	})
}

func mustParse(t *testing.T, v string) reload.Record {
	t.Helper()
	r, err := reload.ParseRecord(v)
	testutil.Must(t, err)
	return r
}
