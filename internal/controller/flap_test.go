package controller_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/rbac"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// A quarantine outlives a restart: the new reloader takes it back from the sealed record on
// the workload, so a change right after the restart is held until the source is quiet, then
// rolls once; without the record it would roll at once (the new process heard no flap).
func TestQuarantineSurvivesARestart(t *testing.T) {
	t.Parallel()
	const quiet = 8 * time.Second
	ns, cm, d, configure, rolls, stop := quarantined(t, quiet)
	eventuallyEvent(t, ns, "web", controller.ReasonSourceQuarantined)
	stop()
	before := len(rolls()["web"]) // once the watch has caught up with the last roll of the flap

	startReloader(t, ns, configure)
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "C" })
	changed := time.Now()
	handled(t, d, cm)
	if got := len(rolls()["web"]); got != before {
		t.Fatalf("the new reloader rolled web %d times on a change to a quarantined source, want 0", got-before)
	}
	testutil.Eventually(t, "one roll once quiet", func() error {
		if got := len(rolls()["web"]); got != before+1 {
			return fmt.Errorf("%d rolls since the restart", got-before)
		}
		return nil
	})
	t.Logf("%d rolls during the flap; after the restart, one roll %v after the last change (quiet %v)", before, time.Since(changed).Round(100*time.Millisecond), quiet)
	handled(t, d, cm)
	if got := len(rolls()["web"]); got != before+1 {
		t.Errorf("%d rolls after the restart, want 1", got-before)
	}
	if v, ok := get(t, d).Annotations[flap.RecordAnnotation]; ok {
		t.Errorf("web keeps its quarantine record after the quiet: %q", v)
	}
}

// A reloader that can't load the install key yet (here it may not get the key's Secret, so
// the loader retries) can't check a quarantine record: the reload waits, and is retried,
// rather than going ahead as if there were no record. Before, after a second without the key
// the record was passed over and web rolled at once. The wait is a wait, retried at a steady
// pace: as a failure, its backoff grew while the key was refused (10 s after a dozen tries,
// minutes later), and web's reload waited that long after the key loaded. Once the key can be
// read, the record is taken over and web rolls once, when the source has been quiet.
func TestQuarantineRecordWaitsForTheKey(t *testing.T) {
	t.Parallel()
	const quiet = 15 * time.Second
	ns, cm, d, configure, rolls, stop := quarantined(t, quiet)
	before := len(rolls()["web"])
	stop()

	// Secrets ignored: with Secrets as sources, nothing reconciles before the key loads.
	cfg, grant := keylessUser(t, ns)
	startReloaderAs(t, cfg, ns, configure, func(o *options.Options) { o.ResourcesToIgnore = []string{"secrets"} })
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "C" })
	changed := time.Now()
	waitedOn(t, d, cm)
	const waits = 4
	testutil.Eventually(t, fmt.Sprintf("%d reconciles of web waiting for the key", waits), func() error {
		got := reloaders.in(ns).outcomesSince("Deployment", client.ObjectKeyFromObject(d), changed)
		if slices.Contains(got, metrics.OutcomeError) {
			t.Fatalf("a reconcile of web waiting for the install key failed, to be retried with backoff (outcomes: %v)", got)
		}
		if len(got) < waits {
			return fmt.Errorf("outcomes %v", got)
		}
		return nil
	})
	if got := len(rolls()["web"]); got != before {
		t.Fatalf("web rolled %d times for a change to a source quarantined on record, the key not loaded", got-before)
	}
	grant()
	testutil.Eventually(t, "one roll once the key loads and the source is quiet", func() error {
		if got := len(rolls()["web"]); got != before+1 {
			return fmt.Errorf("%d rolls since the restart", got-before)
		}
		return nil
	})
	handled(t, d, cm)
	if got := len(rolls()["web"]); got != before+1 {
		t.Errorf("%d rolls after the restart, want 1", got-before)
	}
}

// keylessUser may do what reloader's RBAC grants in ns, but not get the install key's Secret
// until grant is called: its key loader retries meanwhile.
func keylessUser(t *testing.T, ns string) (cfg *rest.Config, grant func()) {
	t.Helper()
	opts := options.Default()
	opts.Namespaces = []string{ns}
	conf, err := options.Parse(opts)
	testutil.Must(t, err)
	user := "keyless-" + ns
	cfg, err = addUser(user)
	testutil.Must(t, err)
	var rules []rbacv1.PolicyRule
	for _, r := range rbac.For(conf, rbac.Platform{OpenShift: true}).Watched {
		if slices.Contains(r.Resources, "secrets") { // list and watch the sources; no get of the key
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "get" })
		}
		rules = append(rules, r)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keyless"}, Rules: rules}
	create(t, role, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keyless"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "keyless"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	return cfg, func() {
		update(t, role, func(r *rbacv1.Role) {
			r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
		})
	}
}

// quarantined starts reloader on Deployment web, which uses ConfigMap cfg, flaps cfg until the
// breaker trips (A->B->A->B->A->B: the fourth change does) and waits for the quarantine's
// record on web. It returns what the test goes on with, the watch of web's rolls included.
func quarantined(t *testing.T, quiet time.Duration) (ns string, cm *corev1.ConfigMap, d *appsv1.Deployment, configure func(*options.Options), rolls func() map[string][]time.Time, stop func()) {
	t.Helper()
	ns = newNamespace(t)
	configure = func(o *options.Options) {
		o.ReloaderNamespace = ns // the install key, which seals the record, lives here
		o.FlapMaxChanges, o.FlapWindow, o.FlapQuiet = 8, 2*time.Minute, quiet
	}
	cm = configMap(ns, "cfg", map[string]string{"k": "A"})
	d = deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, d)
	stop = startReloader(t, ns, configure)
	recorded(t, d)
	rolls = rollTimes(t, ns)
	for i := range 5 {
		update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = []string{"B", "A"}[i%2] })
		time.Sleep(400 * time.Millisecond) // the subject: changes apart, a flap
	}
	testutil.Eventually(t, "the quarantine recorded on web", func() error {
		if v := get(t, d).Annotations[flap.RecordAnnotation]; !strings.Contains(v, "configmap/cfg") {
			return fmt.Errorf("record %q", v)
		}
		return nil
	})
	return ns, cm, d, configure, rolls, stop
}

// A record reloader did not seal is ignored: a tenant can't hold a workload's reloads by
// writing one.
func TestForgedQuarantineRecordIsIgnored(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"k": "A"})
	forged := flap.Encode([]flap.Entry{{Source: "configmap/cfg", Since: time.Now(), Last: time.Now(), Quiet: time.Hour}}) + ";mac=" + strings.Repeat("ab", 32)
	d := deployment(ns, "web", map[string]string{auto: "true", flap.RecordAnnotation: forged}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns, func(o *options.Options) { o.ReloaderNamespace = ns })
	recorded(t, d)
	rolls := rollTimes(t, ns)
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["k"] = "B" })
	testutil.Eventually(t, "web rolled despite the forged record", func() error {
		if got := len(rolls()["web"]); got != 1 {
			return fmt.Errorf("%d rolls", got)
		}
		return nil
	})
}
