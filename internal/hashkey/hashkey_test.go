package hashkey_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/rbac"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/clustertest"
	"github.com/reloader-operator/reloader/internal/testutil"
)

var (
	k8s     client.Client
	cluster *testenv.Cluster
)

func TestMain(m *testing.M) {
	clustertest.Main(m, testenv.Options{}, func(c *testenv.Cluster) (err error) {
		cluster = c
		k8s, err = client.New(c.Config, client.Options{})
		return err
	})
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	testutil.Must(t, k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	return name
}

// TestReplicasStartingTogetherShareOneKey: eight replicas load the key at once in a namespace
// without one; one creates the Secret, the others read it, and all hash alike. A restart reads
// the same key.
func TestReplicasStartingTogetherShareOneKey(t *testing.T) {
	ns := namespace(t, "race")
	ids := make([]string, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			k, err := hashkey.Load(context.Background(), k8s, ns)
			ids[i], errs[i] = k.ID(), err
		})
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("replicas got different keys: %v", ids)
		}
	}
	s := &corev1.Secret{}
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: hashkey.SecretName}, s))
	if s.Immutable == nil || !*s.Immutable {
		t.Error("key Secret is not immutable")
	}
	again, err := hashkey.Load(context.Background(), k8s, ns)
	if err != nil || again.ID() != ids[0] {
		t.Errorf("restart read key %s (%v), want %s", again.ID(), err, ids[0])
	}
}

// TestBrokenKeyIsNeverReplaced: a key Secret of the wrong size is an error that says what to
// do; overwriting it could leave replicas hashing with different keys.
func TestBrokenKeyIsNeverReplaced(t *testing.T) {
	ns := namespace(t, "broken")
	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hashkey.SecretName},
		Data: map[string][]byte{"key": []byte("short")}}
	testutil.Must(t, k8s.Create(context.Background(), bad))
	if _, err := hashkey.Load(context.Background(), k8s, ns); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
	got := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(bad), got); err != nil || string(got.Data["key"]) != "short" {
		t.Errorf("broken key Secret was changed: %v %q", err, got.Data["key"])
	}
}

func TestNamespace(t *testing.T) {
	tests := []struct {
		own     string
		watched []string
		want    string
		isOwn   bool
	}{
		{"reloader", []string{"a"}, "reloader", true},
		{"", []string{"a", "b"}, "a", false},
		{"", []string{"b", "a"}, "a", false},
		{"", nil, hashkey.FallbackNamespace, false},
	}
	for _, tt := range tests {
		if got, own := hashkey.Namespace(tt.own, tt.watched); got != tt.want || own != tt.isOwn {
			t.Errorf("Namespace(%q, %v) = %q, %v; want %q, %v", tt.own, tt.watched, got, own, tt.want, tt.isOwn)
		}
	}
}

// grant binds user to a Role in ns holding rules, and returns the user's config.
func grant(t *testing.T, ns, user string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	cfg, _, err := cluster.AddUser(user)
	testutil.Must(t, err)
	bind(t, ns, user, rules)
	return cfg
}

func bind(t *testing.T, ns, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}},
	} {
		testutil.Must(t, k8s.Create(context.Background(), o))
	}
}

// ownRules are the rules the chart grants in reloader's own namespace ns (the chart's Role
// is tested equal to internal/rbac).
func ownRules(t *testing.T, ns string) []rbacv1.PolicyRule {
	t.Helper()
	conf, err := options.Load(options.Default(), func(name string) string {
		return map[string]string{"POD_NAMESPACE": ns}[name]
	})
	testutil.Must(t, err)
	return rbac.For(conf, rbac.Platform{}).Own
}

// TestChartRoleCreatesOnlyTheKey: a user holding exactly the chart's Role creates the key
// (four replicas racing, all ending with the one key) and can create no other Secret there,
// by POST or by apply.
func TestChartRoleCreatesOnlyTheKey(t *testing.T) {
	ns := namespace(t, "chart-role")
	c, err := client.New(grant(t, ns, "chart-role", ownRules(t, ns)), client.Options{})
	testutil.Must(t, err)
	ctx := context.Background()
	ids := make([]string, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			k, err := hashkey.Load(ctx, c, ns)
			ids[i], errs[i] = k.ID(), err
		})
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("replicas got keys %v, errors %v; want one key", ids, errs)
		}
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Data: map[string][]byte{"k": []byte("v")}}
	if err := c.Create(ctx, other); !apierrors.IsForbidden(err) {
		t.Errorf("create of another Secret: %v, want Forbidden", err)
	}
	ac := corev1ac.Secret("other", ns).WithData(map[string][]byte{"k": []byte("v")})
	if err := c.Apply(ctx, ac, client.FieldOwner("test")); !apierrors.IsForbidden(err) {
		t.Errorf("apply of another Secret: %v, want Forbidden", err)
	}
}

// TestAppliedKeyIsNeverReplaced: an apply of a new key over an existing one is refused (the
// Secret is immutable), so Load, losing a race between its Get and its apply, still returns
// the key already there.
func TestAppliedKeyIsNeverReplaced(t *testing.T) {
	ns := namespace(t, "applied")
	first, err := hashkey.Load(context.Background(), k8s, ns)
	testutil.Must(t, err)
	// What a replica that found no key a moment ago applies now.
	ac := corev1ac.Secret(hashkey.SecretName, ns).WithData(map[string][]byte{"key": make([]byte, hash.KeySize)}).WithImmutable(true)
	if err := k8s.Apply(context.Background(), ac, client.FieldOwner("Reloader")); !apierrors.IsInvalid(err) {
		t.Errorf("apply over the key: %v, want Invalid", err)
	}
	again, err := hashkey.Load(context.Background(), k8s, ns)
	if err != nil || again.ID() != first.ID() {
		t.Errorf("key after a second apply: %s (%v), want %s", again.ID(), err, first.ID())
	}
}

// fallbackGauge reads reloader_hash_key_fallback from reg.
func fallbackGauge(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	testutil.Must(t, err)
	for _, f := range families {
		if f.GetName() == "reloader_hash_key_fallback" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("reloader_hash_key_fallback not registered")
	return 0
}

// TestWithoutRBACFallsBackLoudly: with RBAC made for upstream, which grants nothing on the
// key's Secret, loading retries for the bound given, then goes on without a key, Secrets
// hashed as releases before the key did (reloading goes on after a drop-in swap of the
// image); the gauge turns 1 and a Warning Event about reloader's Pod says what to grant.
func TestWithoutRBACFallsBackLoudly(t *testing.T) {
	ns := namespace(t, "no-rbac")
	cfg := grant(t, ns, "upstream-rbac", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	start := time.Now()
	l, err := hashkey.Setup(ctx, cfg, hashkey.Options{Namespace: ns, Pod: "reloader-0", ForbiddenFor: 2 * time.Second, Registry: reg}, testr.New(t))
	testutil.Must(t, err)
	if err := l.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v; want the UID-keyed fallback", err)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("fell back after %v, before the 2s of retries", took)
	}
	if l.Key().Valid() {
		t.Fatal("a key was loaded without any RBAC")
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", UID: "u-1"}, Data: map[string][]byte{"p": []byte("x")}}
	if got, want := hash.Secret(l.Key(), s), hash.UIDKeyedSecret(s); got != want {
		t.Errorf("hash without key = %q, want the UID-keyed %q", got, want)
	}
	if g := fallbackGauge(t, reg); g != 1 {
		t.Errorf("reloader_hash_key_fallback = %v, want 1", g)
	}
	var events eventsv1.EventList
	testutil.Must(t, k8s.List(ctx, &events, client.InNamespace(ns)))
	if len(events.Items) != 1 {
		t.Fatalf("%d Events, want the fallback's", len(events.Items))
	}
	ev := events.Items[0]
	if ev.Type != corev1.EventTypeWarning || ev.Reason != hashkey.FallbackReason || ev.Regarding.Kind != "Pod" ||
		ev.Regarding.Name != "reloader-0" || !strings.Contains(ev.Note, "secrets named "+hashkey.SecretName) {
		t.Errorf("Event %s %s about %s/%s: %s", ev.Type, ev.Reason, ev.Regarding.Kind, ev.Regarding.Name, ev.Note)
	}
}

// TestRBACGrantedDuringRetriesLoadsTheKey: a Role bound just after reloader starts (a chart
// applied in that order) is found by the retries: the key loads, no fallback.
func TestRBACGrantedDuringRetriesLoadsTheKey(t *testing.T) {
	ns := namespace(t, "late-rbac")
	cfg, _, err := cluster.AddUser("late")
	testutil.Must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	var refusals atomic.Int32
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusForbidden {
				refusals.Add(1)
			}
			return resp, err
		})
	}
	l, err := hashkey.Setup(ctx, cfg, hashkey.Options{Namespace: ns, ForbiddenFor: 20 * time.Second, Registry: reg}, logr.Discard())
	testutil.Must(t, err)
	testutil.Eventually(t, "the first refusal", func() error { // bound after it, as the retries must find
		if refusals.Load() == 0 {
			return errors.New("no request refused yet")
		}
		return nil
	})
	bind(t, ns, "late", ownRules(t, ns))
	testutil.Must(t, l.Wait(ctx))
	if !l.Key().Valid() || fallbackGauge(t, reg) != 0 {
		t.Errorf("key valid %v, fallback %v; want the key loaded", l.Key().Valid(), fallbackGauge(t, reg))
	}
}

// A key that never loads (here: an API server that does not answer) holds a caller no longer
// than the caller's own context, whatever the Loader's context; and Own tells a key kept in
// reloader's own namespace from one kept in a fallback namespace.
func TestWaitEndsWithTheCallersContext(t *testing.T) {
	for _, tc := range []struct {
		opts hashkey.Options
		own  bool
	}{
		{hashkey.Options{Namespace: "ops"}, true},
		{hashkey.Options{Watched: []string{"b", "a"}}, false},
		{hashkey.Options{}, false},
	} {
		tc.opts.Registry = prometheus.NewRegistry()
		loading, stop := context.WithCancel(context.Background())
		t.Cleanup(stop)
		l, err := hashkey.Setup(loading, &rest.Config{Host: "http://127.0.0.1:1"}, tc.opts, logr.Discard())
		testutil.Must(t, err)
		if l.Own() != tc.own {
			t.Errorf("%+v: Own %v, want %v", tc.opts, l.Own(), tc.own)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		err = l.Wait(ctx)
		cancel()
		if err == nil || time.Since(start) > 5*time.Second {
			t.Errorf("Wait on a key that never loads: %v after %s; want an error once the context ends", err, time.Since(start))
		}
	}
}

// roundTripper lets a function serve as an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
