package explain

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/baseline"
	"github.com/reloader-operator/reloader/internal/clientindex"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Controller is what a running controller lends a plan made inside it (the admission
// webhook): its cache, whose field indexes the decision reads as the reconcilers do, so that
// a plan lists nothing from the API server; its source types (Secrets hashed under the
// install's key); the workload kinds its cache holds; its compiled ReloaderConfigs.
type Controller struct {
	// Reader reads from the manager's cache.
	Reader client.Client
	// Sources are the source types the controller watches.
	Sources []sourcecache.SourceType
	// Kinds are the workload kinds the controller reconciles and its cache holds.
	Kinds []workload.Kind
	// Configs compiles the ReloaderConfigs; nil when the controller reads none.
	Configs *reloaderconfig.Cache
	// Caches are the controller's memos of parsed annotation values; nil: none.
	Caches *reload.Caches
	// Baselines are the controller's notes of the changes its workloads without record missed
	// (its sources' handlers hear the planned write too, and note it on them); nil: none.
	Baselines *baseline.Baselines
	// Ledger holds the controller's first records kept apart from the workloads; nil: none.
	Ledger *ledger.Ledger
}

// NewControllerPlanner returns a Planner of one proposed ConfigMap or Secret of namespace ns,
// deciding as the controller that lends c does, from its cache. live is the object as it is
// stored (an admission request's old object, with its content: the cache keeps only hashes),
// nil for a create.
func NewControllerPlanner(ctx context.Context, c Controller, conf options.Config, ns string, proposed, live client.Object) (*Planner, error) {
	explainer := func(wrap func(client.Client) client.Client) (*Explainer, error) {
		read := c.Reader
		if wrap != nil {
			read = wrap(read)
		}
		// No index is registered on the wrapper: lists by index go to the cache, which has them.
		return &Explainer{conf: conf, namespace: ns, client: clientindex.New(scopeCached(read, conf)),
			sources: c.Sources, kinds: c.Kinds, configs: c.Configs, caches: c.Caches, baselines: c.Baselines, ledger: c.Ledger,
			unknownHash: map[source.Kind]bool{}, now: time.Now}, nil
	}
	l, _ := explainer(nil)
	current := func(source.ID, sourcecache.SourceType) (client.Object, error) {
		if live == nil {
			return nil, nil
		}
		return live, nil
	}
	return newPlanner(l, []client.Object{proposed}, current, explainer)
}

// workloadKinds are the kinds e weighs: the controller's, else every kind reloader knows.
func (e *Explainer) workloadKinds() []workload.Kind {
	if e.kinds != nil {
		return e.kinds
	}
	return allKinds()
}
