package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/termsafe"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// bodies collects the JSON documents POSTed to a test server.
type bodies struct {
	mu  sync.Mutex
	raw []string
}

func (b *bodies) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.raw = append(b.raw, string(data))
	b.mu.Unlock()
}

func (b *bodies) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.raw)
}

func collect(t *testing.T) (*bodies, string) {
	b := &bodies{}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, srv.URL
}

// reloadedNote waits for the one Reloaded Event about name and returns its note.
func reloadedNote(t *testing.T, ns, name string) string {
	t.Helper()
	var note string
	testutil.Eventually(t, "Reloaded Event on "+name, func() error {
		evs := eventsAbout(t, ns, name, controller.ReasonReloaded)
		if len(evs) != 1 {
			return fmt.Errorf("%d Reloaded Events", len(evs))
		}
		note = evs[0].Note
		return nil
	})
	return note
}

// allNotes are the notes of every Event in ns.
func allNotes(t *testing.T, ns string) string {
	t.Helper()
	var notes []string
	for _, reason := range []string{controller.ReasonReloaded, controller.ReasonReloadSkipped, controller.ReasonReloadFail} {
		for _, e := range eventsAbout(t, ns, "web", reason) {
			notes = append(notes, e.Note)
		}
	}
	return strings.Join(notes, "\n")
}

func applyConfigMap(t *testing.T, ns, name, manager string, data map[string]string) {
	t.Helper()
	testutil.Must(t, k8s.Apply(context.Background(), corev1ac.ConfigMap(name, ns).WithData(data),
		client.FieldOwner(manager), client.ForceOwnership))
}

// A ConfigMap that field manager team-a applies with one key changed, one added and one
// removed: the Reloaded Event, the alert and reloader_reloads_total name the keys and the
// writer, as the API server recorded it in managedFields.
func TestReloadNamesChangedKeysAndWriter(t *testing.T) {
	ns := newNamespace(t)
	applyConfigMap(t, ns, "app-config", "team-a", map[string]string{"LOG_LEVEL": "info", "OLD": "x", "SAME": "s"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("app-config"))
	create(t, d)
	alerts, url := collect(t)
	startReloader(t, ns, func(o *options.Options) {
		o.Alert = options.Alert{Enabled: true, Sink: "raw", WebhookURL: url}
	})
	recorded(t, d)
	series := map[string]string{"kind": "Deployment", "trigger_manager": "other"}
	before := counter(t, "reloader_reloads_total", series)

	applyConfigMap(t, ns, "app-config", "team-a", map[string]string{"LOG_LEVEL": "debug", "NEW": "y", "SAME": "s"})

	note := reloadedNote(t, ns, "web")
	t.Logf("Event: %s", note)
	for _, want := range []string{
		"Reloaded Deployment web after change of ConfigMap app-config (keys changed: LOG_LEVEL; added: NEW; removed: OLD) by field manager team-a (Apply at ",
	} {
		if !strings.Contains(note, want) {
			t.Errorf("Event note %q\nwant it to contain %q", note, want)
		}
	}
	testutil.Eventually(t, "raw alert", func() error {
		got := alerts.all()
		if len(got) != 1 {
			return fmt.Errorf("%d alerts", len(got))
		}
		var doc struct {
			Sources []struct {
				KeysAdded, KeysRemoved, KeysChanged []string
				ChangedBy                           struct{ Manager, Operation, Time string }
			}
		}
		testutil.Must(t, json.Unmarshal([]byte(got[0]), &doc))
		if len(doc.Sources) != 1 {
			return fmt.Errorf("alert %s", got[0])
		}
		s := doc.Sources[0]
		if !slices.Equal(s.KeysChanged, []string{"LOG_LEVEL"}) || !slices.Equal(s.KeysAdded, []string{"NEW"}) ||
			!slices.Equal(s.KeysRemoved, []string{"OLD"}) || s.ChangedBy.Manager != "team-a" || s.ChangedBy.Operation != "Apply" || s.ChangedBy.Time == "" {
			t.Errorf("alert document %s", got[0])
		}
		return nil
	})
	if after := counter(t, "reloader_reloads_total", series); after != before+1 {
		t.Errorf("reloader_reloads_total%v went from %v to %v, want one more", series, before, after)
	}
}

func secretPodSpec(name string) corev1.PodTemplateSpec {
	tpl := podSpec()
	tpl.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
	return tpl
}

// secretValues are the values the Secret tests write: none may appear in any report.
var secretValues = []string{"hunter2-old-password", "hunter2-NEW-password", "admin-user-value", "tok-VALUE-0123456789"}

func noSecretValues(t *testing.T, where, text string) {
	t.Helper()
	for _, v := range secretValues {
		if strings.Contains(text, v) {
			t.Errorf("%s carries the Secret value %q: %s", where, v, text)
		}
	}
}

// A Secret changed by kubectl edit: the Event and the alert name the keys (names only) and
// the writer, and carry none of the values; the metric counts the reload under kubectl-edit.
func TestSecretChangeNamesKeysNeverValues(t *testing.T) {
	ns := newNamespace(t)
	s := secret(ns, "creds", map[string]string{"password": secretValues[0], "user": secretValues[2]})
	d := deployment(ns, "web", map[string]string{auto: "true"}, secretPodSpec("creds"))
	create(t, s, d)
	alerts, url := collect(t)
	startReloader(t, ns, func(o *options.Options) {
		o.Alert = options.Alert{Enabled: true, Sink: "slack", WebhookURL: url}
	})
	recorded(t, d)
	series := map[string]string{"kind": "Deployment", "trigger_manager": "kubectl-edit"}
	before := counter(t, "reloader_reloads_total", series)

	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(s), s))
	s.Data["password"] = []byte(secretValues[1])
	s.Data["token"] = []byte(secretValues[3])
	testutil.Must(t, k8s.Update(context.Background(), s, client.FieldOwner("kubectl-edit")))

	note := reloadedNote(t, ns, "web")
	t.Logf("Event: %s", note)
	if want := "after change of Secret creds (keys changed: password; added: token) by field manager kubectl-edit (Update at "; !strings.Contains(note, want) {
		t.Errorf("Event note %q\nwant it to contain %q", note, want)
	}
	testutil.Eventually(t, "Slack alert", func() error {
		if got := alerts.all(); len(got) != 1 {
			return fmt.Errorf("%d alerts", len(got))
		}
		return nil
	})
	alert := alerts.all()[0]
	if !strings.Contains(alert, "keys changed: password; added: token") || !strings.Contains(alert, "by field manager kubectl-edit (Update at ") {
		t.Errorf("Slack alert %s names neither the keys nor the writer", alert)
	}
	noSecretValues(t, "an Event", allNotes(t, ns))
	noSecretValues(t, "an alert", alert)
	if after := counter(t, "reloader_reloads_total", series); after != before+1 {
		t.Errorf("reloader_reloads_total%v went from %v to %v, want one more", series, before, after)
	}
}

// With --webhook-url, the document of a Secret's change names its keys and writer in
// structured fields, and none of its values.
func TestWebhookNamesKeysNeverValues(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	s := secret(ns, "creds", map[string]string{"password": secretValues[0], "user": secretValues[2]})
	d := deployment(ns, "web", map[string]string{auto: "true"}, secretPodSpec("creds"))
	create(t, s, d)
	hook, url := collect(t)
	started := time.Now()
	startReloader(t, ns, func(o *options.Options) { o.WebhookURL = url })
	notifierHandled(t, s, started) // first sight: the change below is one

	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(s), s))
	s.Data["password"] = []byte(secretValues[1])
	delete(s.Data, "user")
	testutil.Must(t, k8s.Update(context.Background(), s, client.FieldOwner("external-secrets")))

	testutil.Eventually(t, "webhook document", func() error {
		if got := hook.all(); len(got) != 1 {
			return fmt.Errorf("%d documents", len(got))
		}
		return nil
	})
	raw := hook.all()[0]
	var doc struct {
		KeysAdded, KeysRemoved, KeysChanged []string
		ChangedBy                           struct{ Manager, Operation string }
	}
	testutil.Must(t, json.Unmarshal([]byte(raw), &doc))
	if !slices.Equal(doc.KeysChanged, []string{"password"}) || !slices.Equal(doc.KeysRemoved, []string{"user"}) || len(doc.KeysAdded) != 0 ||
		doc.ChangedBy.Manager != "external-secrets" || doc.ChangedBy.Operation != "Update" {
		t.Errorf("webhook document %s", raw)
	}
	noSecretValues(t, "the webhook document", raw)
}

// A change of 1,000 keys names ten of each list and counts the rest, within the Event's
// limit; a manager name full of chat markup, the worst the API server accepts (128 printable
// characters), arrives reduced to safe characters. A longer one with control characters is
// refused by the API server itself.
func TestWhatChangedIsBounded(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	data := map[string]string{}
	for i := range 1000 {
		data[fmt.Sprintf("key-%04d", i)] = "v1"
	}
	cm := configMap(ns, "big", data)
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("big"))
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)

	hostile := "<!channel> *bold* `code` [x](http://evil) |" + strings.Repeat("a b", 50)
	hostile = hostile[:128]
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(cm), cm))
	for k := range cm.Data {
		cm.Data[k] = "v2"
	}
	// The API server answers this write only when its request timeout (60 s) ends, with a 504:
	// 5 s tell enough. Had it taken the write, the one below, from the same resourceVersion,
	// would meet a conflict.
	refused, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := k8s.Update(refused, cm.DeepCopy(), client.FieldOwner(strings.Repeat("\x1b[2J\u202e", 10<<10/8))); err == nil {
		t.Fatal("the API server took a 10 KiB field manager of control characters")
	}
	testutil.Must(t, k8s.Update(context.Background(), cm, client.FieldOwner(hostile)))

	note := reloadedNote(t, ns, "web")
	t.Logf("Event: %s", note)
	if len(note) > termsafe.MaxNote {
		t.Errorf("Event note of %d bytes", len(note))
	}
	if !strings.Contains(note, "keys changed: key-0000, key-0001, key-0002, key-0003, key-0004, key-0005, key-0006, key-0007, key-0008, key-0009 and 990 more") {
		t.Errorf("Event note %q does not name ten keys and count the others", note)
	}
	if strings.Contains(note, "<!channel>") {
		t.Errorf("Event note %q carries the manager's markup", note)
	}
	if want := "by field manager __channel___bold___code___x__http:/"; !strings.Contains(note, want) {
		t.Errorf("Event note %q\nwant the manager reduced to safe characters: %q", note, want)
	}
}

// A workload restricted to some keys is told of those only: a write that changes keys a and b
// reloads the workload that reads a, and its Event names a alone.
func TestRestrictedReloadNamesItsKeysOnly(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1", "b": "1"})
	d := deployment(ns, "web", map[string]string{auto: "true", reload.ConfigMapKeysAnnotation: "cfg/a"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns)
	recorded(t, d)
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["a"], c.Data["b"], c.Data["c"] = "2", "2", "new" })
	note := reloadedNote(t, ns, "web")
	t.Logf("Event: %s", note)
	if !strings.Contains(note, "(keys changed: a) by ") || strings.Contains(note, "added") {
		t.Errorf("Event note %q, want keys changed: a alone", note)
	}
}

// Two writes within the coalescing window make one reload, and its Event names the keys of
// both: what changed since the state the workload last applied.
func TestCoalescedWritesNameAllTheirKeys(t *testing.T) {
	// Alone: timed by reloader's windows.
	ns := newNamespace(t)
	cm := configMap(ns, "cfg", map[string]string{"a": "1", "b": "1", "c": "1"})
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, cm, d)
	startReloader(t, ns, func(o *options.Options) { o.CoalesceWindow = 2 * time.Second })
	recorded(t, d)
	changes := templateChanges(t, d)
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["a"] = "2" })
	update(t, cm, func(c *corev1.ConfigMap) { c.Data["b"] = "2"; delete(c.Data, "c") })
	note := reloadedNote(t, ns, "web")
	t.Logf("Event: %s", note)
	if n := changes(); n != 1 {
		t.Errorf("%d template changes, want one reload", n)
	}
	if !strings.Contains(note, "(keys changed: a, b; removed: c) by ") {
		t.Errorf("Event note %q, want the keys of both writes", note)
	}
}

// TestForgedFutureWriterIsNotTheWriter: a managedFields entry written by hand for
// "security-bot", dated 2999, does not claim a later change written by real-writer: the
// Reloaded Event names real-writer, as the field manager the API server reports.
func TestForgedFutureWriterIsNotTheWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	applyConfigMap(t, ns, "app-config", "team-a", map[string]string{"LOG_LEVEL": "info"})
	cm := &corev1.ConfigMap{}
	testutil.Must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-config"}, cm))
	forged := metav1.NewTime(time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC))
	cm.ManagedFields = append(cm.ManagedFields, metav1.ManagedFieldsEntry{Manager: "security-bot", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "v1", Time: &forged, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}})
	testutil.Must(t, k8s.Update(ctx, cm, client.FieldOwner("team-a")))
	testutil.Must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-config"}, cm))
	if !slices.ContainsFunc(cm.ManagedFields, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == "security-bot" }) {
		t.Fatalf("the API server did not keep the forged entry: %+v", cm.ManagedFields)
	}
	d := deployment(ns, "web", map[string]string{auto: "true"}, podSpec("app-config"))
	create(t, d)
	startReloader(t, ns)
	recorded(t, d)

	cm.Data["LOG_LEVEL"] = "debug"
	testutil.Must(t, k8s.Update(ctx, cm, client.FieldOwner("real-writer")))
	note := reloadedNote(t, ns, "web")
	t.Logf("Event: %s", note)
	if want := "by field manager real-writer (Update at "; !strings.Contains(note, want) || strings.Contains(note, "security-bot") || strings.Contains(note, "2999") {
		t.Errorf("Event note %q\nwant it to contain %q, and neither security-bot nor 2999", note, want)
	}
}
