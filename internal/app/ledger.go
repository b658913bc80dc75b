package app

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/pace"
)

// newLedger returns the ledger of first records (internal/ledger), run by mgr, when conf
// keeps one; nil otherwise. It lives beside the install key: in reloader's own namespace,
// else, for a run outside the cluster that watches every namespace, in the key's fallback
// namespace. A run restricted to some namespaces without one of its own keeps none (the
// fallback would be a tenant's namespace, and tenants do not write first records). Its writes
// take first-record slots of pacer (--first-sight-rate), one per namespace written.
func newLedger(mgr manager.Manager, conf options.Config, pacer *pace.Pacer, logger logr.Logger) (*ledger.Ledger, error) {
	if !conf.FirstRecordLedger || conf.WebhookURL != "" {
		// --webhook-url writes no records at all.
		return nil, nil
	}
	ns, own := hashkey.Namespace(conf.ReloaderNamespace, conf.Namespaces)
	if !own && len(conf.Namespaces) > 0 {
		logger.Info("first records are written onto the workloads: no namespace of reloader's own (RELOADER_NAMESPACE, POD_NAMESPACE) to keep their ledger in")
		return nil, nil
	}
	cs, err := corev1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	l := ledger.New(cs, ns, logger.WithName("ledger"))
	l.Budget = func(ctx context.Context) error {
		for {
			wait := pacer.FirstSight(ledgerSlot, time.Now())
			if wait <= 0 {
				return nil
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	return l, mgr.Add(l)
}

// ledgerSlot is the pacer key of the ledger's writes: one slot at a time.
const ledgerSlot = "reloader/first-records-ledger"
