package explain

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/workload"
)

// A workload reloader has seen but not reloaded has its record in the ledger, not on itself:
// explain reads it there, as the controller does, and explains a change since as a reload,
// not as a first record.
func TestExplainReadsFirstRecordsFromTheLedger(t *testing.T) {
	ctx := context.Background()
	ns, own := "explain-ledger", "explain-ledger-own"
	namespace(t, ns)
	namespace(t, own)
	create(t, configMap(ns, "cfg", "v2"))
	seen := deployment(ns, "seen", map[string]string{"reloader.stakater.com/auto": "true"}, podSpec([]string{"cfg"}, nil))
	unseen := deployment(ns, "unseen", map[string]string{"reloader.stakater.com/auto": "true"}, podSpec([]string{"cfg"}, nil))
	create(t, seen, unseen)
	testutil.Must(t, k8s.Get(ctx, client.ObjectKeyFromObject(seen), seen))
	rec := reload.Record{"configmap/cfg": hash.ConfigMap(configMap(ns, "cfg", "v1"))}
	create(t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: ledger.Name(ns), Labels: map[string]string{ledger.Label: ns}},
		Data:       map[string]string{ledger.Key("Deployment", "seen"): string(seen.UID) + " " + rec.Encode()},
	})

	e := explainer(t, testConf(t), ns, own)
	w, err := e.Workload(ctx, workload.Deployment(), "seen")
	testutil.Must(t, err)
	if w.Next.Action != ActionReload || len(w.Sources) != 1 || w.Sources[0].State != StateChanged {
		t.Errorf("a workload recorded in the ledger, its source changed since, explained as %+v; want a reload", w)
	}
	w, err = e.Workload(ctx, workload.Deployment(), "unseen")
	testutil.Must(t, err)
	if w.Next.Action != ActionRecord {
		t.Errorf("a workload in no ledger and without record explained as %+v; want its first record", w.Next)
	}

	off := explainer(t, testConf(t, func(o *options.Options) { o.FirstRecordLedger = false }), ns, own)
	w, err = off.Workload(ctx, workload.Deployment(), "seen")
	testutil.Must(t, err)
	if w.Next.Action != ActionRecord {
		t.Errorf("with --first-record-ledger=false the ledger is read: %+v", w.Next)
	}
}
