package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
)

// The flap breaker on a real control plane, windows shortened by flags: two writers (field
// managers writer-a and writer-b) alternate a Secret's content 30 times; its Deployment rolls
// a handful of times, the Warning Event names both managers, the quarantine is recorded on the
// Deployment, and once the Secret is quiet the Deployment rolls once, on the latest content;
// a later single change rolls it once. Then a ConfigMap whose own annotation sets a long quiet
// flaps, and `reloader release` ends its quarantine: one roll.
func TestFlapBreaker(t *testing.T) {
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{Rollouts: true, Nodes: 1})
	const own, ns = "reloader-system", "flap"
	for _, n := range []string{own, ns} {
		if err := cluster.EnsureNamespace(ctx, cl, n); err != nil {
			t.Fatal(err)
		}
	}
	out := outputLoggedOnFailure(t)
	_, addr := startReady(t, ctx, bin, cluster.Kubeconfig, own, "reloader | ", out,
		"--flap-max-changes=8", "--flap-window=2m", "--flap-quiet=15s")
	templates := watchTemplates(t, ctx, cluster.Config, ns)

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, StringData: map[string]string{"token": "A"}}
	web := objects.AutoDeployment(ns, "web", "unused")
	web.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}
	for _, o := range []client.Object{secret, web} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitRecorded(t, ctx, cl, web)
	const env = "STAKATER_CREDS_SECRET"

	write := func(obj client.Object, manager, field, value string) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{field: map[string]string{"token": value}})
		if err := cl.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(manager)); err != nil {
			t.Fatal(err)
		}
	}
	// The breaker trips on the fourth or fifth write (two writers, content back to an earlier
	// state); the ten after it show that it holds while the flap goes on.
	const writes = 14
	started := time.Now()
	for i := range writes {
		manager, value := "writer-a", "B"
		if i%2 == 1 {
			manager, value = "writer-b", "A"
		}
		write(secret, manager, "data", base64.StdEncoding.EncodeToString([]byte(value)))
		time.Sleep(2 * time.Second) // the subject: writes 2 s apart, a flap
	}
	during := len(templates.values("web", env))
	t.Logf("%d alternating writes in %v by writer-a and writer-b: Deployment web rolled %d times while they went on", writes, time.Since(started).Round(time.Second), during)
	if during > 5 {
		t.Errorf("web rolled %d times during the flap, want a handful (at most 5)", during)
	}
	ev := waitForEvent(t, ctx, cl, ns, "web", "SourceQuarantined")
	t.Logf("Event %s (%s): %s", ev.Reason, ev.Type, ev.Note)
	if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "writer-a") || !strings.Contains(ev.Note, "writer-b") {
		t.Errorf("SourceQuarantined Event %s %q: want a Warning naming writer-a and writer-b", ev.Type, ev.Note)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil {
		t.Fatal(err)
	}
	if rec := web.Annotations[flap.RecordAnnotation]; !strings.Contains(rec, "secret/creds") || !strings.Contains(rec, ";mac=") {
		t.Errorf("web's quarantine record %q: want secret/creds, sealed", rec)
	}
	explained, err := exec.CommandContext(ctx, bin, "explain", "deployment/web", "-n", ns, "--kubeconfig", cluster.Kubeconfig, "--reloader-namespace", own).CombinedOutput()
	t.Logf("reloader explain deployment/web during the quarantine:\n%s", explained)
	if err != nil || !strings.Contains(string(explained), "(quarantine)") {
		t.Errorf("explain does not show the quarantine (%v)", err)
	}
	if got := gauge("http://"+addr+"/metrics", "reloader_quarantined_sources", ""); got != 1 {
		t.Errorf("reloader_quarantined_sources = %d during the quarantine, want 1", got)
	}

	// Quiet for --flap-quiet: one roll, on the latest content.
	testutil.Eventually(t, "web rolled once after the quiet", testutil.Cond(func() (bool, error) {
		return len(templates.values("web", env)) > during, nil
	}))
	settled(t, "reloader", addr) // room for a second roll to show
	after := len(templates.values("web", env))
	t.Logf("after the quiet: %d roll(s) (%d in all)", after-during, after)
	if after != during+1 {
		t.Errorf("web rolled %d times after the quiet, want 1", after-during)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil {
		t.Fatal(err)
	}
	if _, ok := web.Annotations[flap.RecordAnnotation]; ok {
		t.Errorf("web keeps its quarantine record after the quiet: %q", web.Annotations[flap.RecordAnnotation])
	}

	// A later single change rolls once.
	write(secret, "writer-a", "data", base64.StdEncoding.EncodeToString([]byte("C")))
	testutil.Eventually(t, "web rolled on a single change", testutil.Cond(func() (bool, error) {
		return len(templates.values("web", env)) > after, nil
	}))
	settled(t, "reloader", addr)
	if got := len(templates.values("web", env)); got != after+1 {
		t.Errorf("a single change after the quiet rolled web %d times, want 1", got-after)
	}

	// Release: a ConfigMap whose quiet (its annotation) outlasts the test.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings",
		Annotations: map[string]string{flap.QuietAnnotation: "1h"}}, Data: map[string]string{"token": "A"}}
	api := objects.AutoDeployment(ns, "api", "settings")
	for _, o := range []client.Object{cm, api} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitRecorded(t, ctx, cl, api)
	const cmEnv = "STAKATER_SETTINGS_CONFIGMAP"
	for i := range 6 {
		write(cm, "flux", "data", []string{"B", "A"}[i%2])
		time.Sleep(2 * time.Second) // the subject: writes 2 s apart, a flap
	}
	testutil.Eventually(t, "api's quarantine recorded", testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(api), api)
		return strings.Contains(api.Annotations[flap.RecordAnnotation], "configmap/settings"), err
	}))
	held := len(templates.values("api", cmEnv))
	settledHolding(t, "reloader", addr, "quarantine")
	if got := len(templates.values("api", cmEnv)); got != held {
		t.Fatalf("api rolled while its ConfigMap was in quarantine (%d -> %d)", held, got)
	}
	cmd := exec.CommandContext(ctx, bin, "release", "configmap/settings", "-n", ns, "--kubeconfig", cluster.Kubeconfig)
	released, err := cmd.CombinedOutput()
	t.Logf("reloader release configmap/settings: %s", strings.TrimSpace(string(released)))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "api rolled after the release", testutil.Cond(func() (bool, error) {
		return len(templates.values("api", cmEnv)) > held, nil
	}))
	settled(t, "reloader", addr)
	if got := len(templates.values("api", cmEnv)); got != held+1 {
		t.Errorf("the release rolled api %d times, want 1", got-held)
	}
	t.Logf("ConfigMap settings: api rolled %d times during its flap, once on release", held)
	waitForEvent(t, ctx, cl, ns, "api", "QuarantineReleased")

	// The release left on the ConfigMap does not release its next flap.
	for i := range 6 {
		write(cm, "flux", "data", []string{"C", "D"}[i%2])
		time.Sleep(2 * time.Second) // the subject: writes 2 s apart, a flap
	}
	testutil.Eventually(t, "api's new quarantine recorded", testutil.Cond(func() (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(api), api)
		return strings.Contains(api.Annotations[flap.RecordAnnotation], "configmap/settings"), err
	}))
	if n := warnings(t, ctx, cl, ns, "api"); n < 2 {
		t.Errorf("%d SourceQuarantined Events on api, want one per quarantine (2)", n)
	}
}

// warnings counts the SourceQuarantined Events about name (a series counts as its count).
func warnings(t *testing.T, ctx context.Context, cl client.Client, ns, name string) int {
	t.Helper()
	return countEvents(t, ctx, cl, ns, name, "SourceQuarantined")
}

// countEvents counts the Events with reason about name (a series counts as its count).
func countEvents(t *testing.T, ctx context.Context, cl client.Client, ns, name, reason string) int {
	t.Helper()
	var events eventsv1.EventList
	if err := cl.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			n++
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
	}
	return n
}
