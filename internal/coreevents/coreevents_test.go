package coreevents_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/coreevents"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/clustertest"
	"github.com/reloader-operator/reloader/internal/testutil"
)

var (
	cluster *testenv.Cluster
	admin   client.Client
)

func TestMain(m *testing.M) {
	clustertest.Main(m, testenv.Options{}, func(c *testenv.Cluster) (err error) {
		cluster = c
		admin, err = client.New(c.Config, client.Options{})
		return err
	})
}

// upstreamUser is a user holding only what upstream's ClusterRole grants on Events: create
// and patch on core ("") events, nothing in events.k8s.io.
func upstreamUser(t *testing.T, ns string) *rest.Config {
	t.Helper()
	name := "upstream-" + rand.String(5)
	cfg, _, err := cluster.AddUser(name)
	testutil.Must(t, err)
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}},
	} {
		testutil.Must(t, admin.Create(context.Background(), o))
	}
	return cfg
}

func coreEvents(t *testing.T, ns, reason string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	testutil.Must(t, admin.List(context.Background(), &list, client.InNamespace(ns)))
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// Under upstream's RBAC, a reload's Event is a core Event with upstream's source.component
// (by the kind of source that changed), reason and message, the action and related source
// kept; a repeat is one Event whose count, lastTimestamp and series grow, and the same
// object reads back through events.k8s.io.
func TestEventsAsUpstreamWritesThem(t *testing.T) {
	ns := "events-" + rand.String(5)
	testutil.Must(t, admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	cs, err := kubernetes.NewForConfig(upstreamUser(t, ns))
	testutil.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b := coreevents.NewBroadcaster(cs.CoreV1())
	testutil.Must(t, b.StartRecordingToSinkWithContext(ctx))
	rec := coreevents.NewRecorder(b, clientgoscheme.Scheme)

	web := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "uid-web"}}
	api := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api", UID: "uid-api"}}
	cm := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "cfg"}
	sec := &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: "db"}

	rec.Eventf(web, cm, corev1.EventTypeNormal, "Reloaded", "Reload", "Reloaded Deployment %s after change of ConfigMap cfg", "web")
	rec.Eventf(api, sec, corev1.EventTypeWarning, "ReloadFail", "Reload", "Reload after change of Secret db failed: %s", "boom")
	rec.Eventf(api, nil, corev1.EventTypeNormal, "Resumed", "Resume", "Resumed Deployment api after its pause period")

	testutil.Eventually(t, "three core Events", func() error {
		for reason, want := range map[string]struct{ component, regarding, related, message string }{
			"Reloaded":   {coreevents.ConfigMaps, "web", "cfg", "Reloaded Deployment web after change of ConfigMap cfg"},
			"ReloadFail": {coreevents.Secrets, "api", "db", "Reload after change of Secret db failed: boom"},
			"Resumed":    {coreevents.Component, "api", "", "Resumed Deployment api after its pause period"},
		} {
			evs := coreEvents(t, ns, reason)
			if len(evs) != 1 {
				return fmt.Errorf("%d %s Events", len(evs), reason)
			}
			e := evs[0]
			related := ""
			if e.Related != nil {
				related = e.Related.Name
			}
			if e.Source.Component != want.component || e.ReportingController != want.component || e.InvolvedObject.Name != want.regarding ||
				related != want.related || e.Message != want.message || e.Count != 1 || e.LastTimestamp.IsZero() || e.FirstTimestamp.IsZero() {
				return fmt.Errorf("%s: component %q/%q about %s related %q count %d last %v: %q; want %+v", reason, e.Source.Component,
					e.ReportingController, e.InvolvedObject.Name, related, e.Count, e.LastTimestamp, e.Message, want)
			}
		}
		return nil
	})

	// A repeat of the Reloaded Event: one Event, counted twice.
	time.Sleep(1100 * time.Millisecond) // lastTimestamp has whole seconds
	rec.Eventf(web, cm, corev1.EventTypeNormal, "Reloaded", "Reload", "Reloaded Deployment %s after change of ConfigMap cfg", "web")
	testutil.Eventually(t, "one Reloaded series", func() error {
		evs := coreEvents(t, ns, "Reloaded")
		if len(evs) != 1 {
			return fmt.Errorf("%d Reloaded Events, want 1", len(evs))
		}
		e := evs[0]
		if e.Count != 2 || e.Series == nil || e.Series.Count != 2 || !e.LastTimestamp.After(e.FirstTimestamp.Time) {
			return fmt.Errorf("count %d series %+v first %v last %v; want 2, and lastTimestamp moved", e.Count, e.Series, e.FirstTimestamp, e.LastTimestamp)
		}
		return nil
	})
	var list eventsv1.EventList
	testutil.Must(t, admin.List(context.Background(), &list, client.InNamespace(ns)))
	found := false
	for _, e := range list.Items {
		if e.Reason == "Reloaded" {
			found = true
			if e.Series == nil || e.Series.Count != 2 || e.Regarding.Name != "web" || e.Action != "Reload" || e.DeprecatedSource.Component != coreevents.ConfigMaps {
				t.Errorf("through events.k8s.io: %+v", e)
			}
		}
	}
	if !found {
		t.Error("the Reloaded Event is not listed through events.k8s.io")
	}
}
