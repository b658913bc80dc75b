package planwebhook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/planwebhook"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// stuck is a cache that never answers a list until released.
type stuck struct {
	client.Client
	release chan struct{}
}

func (s stuck) List(context.Context, client.ObjectList, ...client.ListOption) error {
	<-s.release
	return context.Canceled
}

func request(t *testing.T, kind, ns string, op admissionv1.Operation, obj runtime.Object) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	testutil.Must(t, err)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: kind}, Namespace: ns, Operation: op,
		Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: raw},
	}}
}

// TestAdmittedUnplanned: what the webhook can't or need not plan is admitted, saying why when
// reloader would roll something there: not synced, another replica's shard, a kind it does
// not plan, too slow; nothing said for a namespace reloader does not watch or a delete.
func TestAdmittedUnplanned(t *testing.T) {
	o := options.Default()
	o.Namespaces = []string{"watched"}
	conf, err := options.Parse(o)
	testutil.Must(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "watched", Name: "cfg"}, Data: map[string]string{"k": "v"}}
	release := make(chan struct{})
	defer close(release)
	slow := explain.Controller{Reader: stuck{release: release}, Sources: []sourcecache.SourceType{sourcecache.ConfigMaps}, Kinds: []workload.Kind{workload.Deployment()}}
	notOwned := func(string) (bool, bool) { return false, false }
	for _, tt := range []struct {
		name string
		h    *planwebhook.Handler
		req  admission.Request
		warn string // "": admitted without a warning
	}{
		{"not synced", &planwebhook.Handler{Conf: conf, Ready: func() bool { return false }}, request(t, "ConfigMap", "watched", admissionv1.Update, cm), "its cache has not synced"},
		{"another shard", &planwebhook.Handler{Conf: conf, Shard: notOwned}, request(t, "ConfigMap", "watched", admissionv1.Update, cm), "shard this replica does not hold"},
		{"not a source", &planwebhook.Handler{Conf: conf}, request(t, "Pod", "watched", admissionv1.Update, &corev1.Pod{}), "only ConfigMaps and Secrets"},
		{"too slow", &planwebhook.Handler{Conf: conf, Controller: slow, Timeout: 50 * time.Millisecond}, request(t, "ConfigMap", "watched", admissionv1.Update, cm), "not planned within 50ms"},
		{"unwatched namespace", &planwebhook.Handler{Conf: conf, Ready: func() bool { return false }}, request(t, "ConfigMap", "other", admissionv1.Update, cm), ""},
		{"delete", &planwebhook.Handler{Conf: conf, Ready: func() bool { return false }}, request(t, "ConfigMap", "watched", admissionv1.Delete, cm), ""},
	} {
		start := time.Now()
		resp := tt.h.Handle(context.Background(), tt.req)
		if !resp.Allowed {
			t.Errorf("%s: refused: %+v", tt.name, resp.Result)
		}
		switch {
		case tt.warn == "" && len(resp.Warnings) > 0:
			t.Errorf("%s: warnings %q, want none", tt.name, resp.Warnings)
		case tt.warn != "" && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tt.warn)):
			t.Errorf("%s: warnings %q, want one saying %q", tt.name, resp.Warnings, tt.warn)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: answered in %v", tt.name, d)
		}
	}
}

// TestBoundedPlansInFlight: plans that outlive their timeout keep their slot until they end;
// past 8 of them, writes are admitted unplanned at once instead of piling up goroutines.
func TestBoundedPlansInFlight(t *testing.T) {
	conf, err := options.Parse(options.Default())
	testutil.Must(t, err)
	release := make(chan struct{})
	defer close(release)
	h := &planwebhook.Handler{Conf: conf, Timeout: 10 * time.Millisecond,
		Controller: explain.Controller{Reader: stuck{release: release}, Sources: []sourcecache.SourceType{sourcecache.ConfigMaps}, Kinds: []workload.Kind{workload.Deployment()}}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}}
	req := request(t, "ConfigMap", "ns", admissionv1.Update, cm)
	for i := range 8 {
		if w := h.Handle(context.Background(), req).Warnings; len(w) != 1 || !strings.Contains(w[0], "not planned within") {
			t.Fatalf("plan %d: warnings %q", i, w)
		}
	}
	if w := h.Handle(context.Background(), req).Warnings; len(w) != 1 || !strings.Contains(w[0], "too many writes planned at once") {
		t.Errorf("the 9th: warnings %q, want too many", w)
	}
}
