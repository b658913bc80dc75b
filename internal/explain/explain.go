// Package explain answers why a workload did or did not reload, and what a change of a
// source would reload, for `reloader explain`. It reads the cluster with a direct client
// (read-only, no informers) and decides with the controller's own code: the reconcilers are
// the controller's, built by app.NewReconciler, and the cache field indexes they read are
// applied client-side by clientindex.
package explain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/baseline"
	"github.com/reloader-operator/reloader/internal/clientindex"
	"github.com/reloader-operator/reloader/internal/coalesce"
	"github.com/reloader-operator/reloader/internal/controller"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/lookup"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Explainer explains the workloads and sources of one namespace.
type Explainer struct {
	conf      options.Config
	namespace string
	client    *clientindex.Client
	sources   []sourcecache.SourceType
	// kinds are the workload kinds weighed; nil: every kind reloader knows.
	kinds []workload.Kind
	// configs compiles the ReloaderConfigs; nil when their API is not served or readable.
	configs *reloaderconfig.Cache
	// caches are the controller's memos of parsed values (Controller.Caches); nil: none.
	caches *reload.Caches
	// baselines are the controller's notes of the changes its workloads without record
	// missed (Controller.Baselines); nil: a plan from outside, which knows none.
	baselines *baseline.Baselines
	// ledger holds the first records reloader keeps apart from the workloads; nil: none read.
	ledger *ledger.Ledger
	// unknownHash are the source kinds whose hashes can't be computed here.
	unknownHash map[source.Kind]bool
	// secretsHidden: Secrets may not be read in the namespace, so they are left out.
	secretsHidden bool
	// notes say what limits the explanation; keyNote, shown when a Secret is weighed, why
	// the hash key could not be read.
	notes   []string
	keyNote string
	// ledgerNote, shown for a workload without record annotation, says why the ledger of
	// first records could not be read.
	ledgerNote string
	now        func() time.Time
	// guardrails are made once, on first use (guardrailsOf).
	guardrails *app.Guardrails
}

// New returns an Explainer of namespace ns, deciding as a reloader started with conf would.
// The Secret hash key is read from reloader's own namespace, keyNamespace, and nowhere else:
// a key found elsewhere is not reloader's. Nothing is written to the cluster.
func New(ctx context.Context, cfg *rest.Config, conf options.Config, ns, keyNamespace string) (*Explainer, error) {
	return newExplainer(ctx, cfg, conf, ns, keyNamespace, nil)
}

// newExplainer is New with the decision's reads going through wrap(c), when wrap is set
// (`reloader plan` overlays the proposed sources); the access checks and the key are read
// from the cluster as it is.
func newExplainer(ctx context.Context, cfg *rest.Config, conf options.Config, ns, keyNamespace string, wrap func(client.Client) client.Client) (*Explainer, error) {
	scheme, err := app.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	read := client.Client(c)
	if wrap != nil {
		read = wrap(c)
	}
	e := &Explainer{conf: conf, namespace: ns, client: clientindex.New(scopeSources(read, conf)),
		unknownHash: map[source.Kind]bool{}, now: time.Now}
	if err := e.addSources(ctx, c, keyNamespace); err != nil {
		return nil, err
	}
	if err := e.addConfigs(ctx, c); err != nil {
		return nil, err
	}
	if err := e.readLedger(ctx, c, keyNamespace); err != nil {
		return nil, err
	}
	for _, kind := range allKinds() {
		if err := lookup.IndexWorkloads(ctx, e.client, kind, conf.Keys); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// addSources sets up every source kind, the ignored ones too, so that the decision can say
// they are ignored. Secrets are hashed with the install's key, read-only; without the key
// their hashes are unknown. Without read access to Secrets (RBAC has no verb for their
// metadata alone), they are left out, and the notes say so.
func (e *Explainer) addSources(ctx context.Context, c client.Client, keyNamespace string) error {
	e.sources = append(e.sources, sourcecache.ConfigMaps)
	err := c.List(ctx, &corev1.SecretList{}, client.InNamespace(e.namespace), client.Limit(1))
	switch {
	case apierrors.IsForbidden(err):
		e.secretsHidden = true
		e.notes = append(e.notes, "Secrets are left out: no read access to Secrets in "+e.namespace+" (get and list); the Secrets on the workload's record are listed with their recorded hashes, their state unknown")
	case err != nil:
		return fmt.Errorf("list secrets in %s: %w", e.namespace, err)
	default:
		key, err := e.readKey(ctx, c, keyNamespace)
		if err != nil {
			return err
		}
		e.sources = append(e.sources, sourcecache.Secrets(key))
	}
	if !e.conf.EnableCSIIntegration {
		return nil
	}
	// As the controller does, CSI mounts count only where the driver's API is served.
	err = c.List(ctx, sourcecache.CSIMounts.NewList(), client.InNamespace(e.namespace), client.Limit(1))
	switch {
	case apimeta.IsNoMatchError(err):
		e.notes = append(e.notes, "--enable-csi-integration: the Secrets Store CSI driver's API is not served; CSI secrets are left out, as the controller leaves them")
		return nil
	case apierrors.IsForbidden(err):
		e.notes = append(e.notes, "CSI secrets are left out: no read access to secretproviderclasspodstatuses in "+e.namespace+" (get and list)")
		return nil
	case err != nil:
		return fmt.Errorf("list CSI mounts in %s: %w", e.namespace, err)
	}
	e.sources = append(e.sources, sourcecache.CSIMounts)
	return lookup.IndexPooled(ctx, e.client, sourcecache.CSIMounts)
}

// addConfigs reads ReloaderConfigs when the cluster serves their API, as the controller does.
func (e *Explainer) addConfigs(ctx context.Context, c client.Client) error {
	err := c.List(ctx, &v1alpha1.ReloaderConfigList{}, client.InNamespace(e.namespace), client.Limit(1))
	switch {
	case apimeta.IsNoMatchError(err):
	case apierrors.IsForbidden(err):
		e.notes = append(e.notes, "ReloaderConfigs are left out: no read access to them in "+e.namespace+" (get and list)")
	case err != nil:
		return fmt.Errorf("list ReloaderConfigs in %s: %w", e.namespace, err)
	default:
		e.configs = &reloaderconfig.Cache{}
	}
	return nil
}

// readKey reads reloader's Secret hash key from its namespace ns. The key is reloader's
// alone: whoever holds it can test guesses of any Secret against the hashes in the pod
// templates they can read. So a user without access to it (Forbidden), or an install without
// one (NotFound), gets the explanation without Secret hashes: the returned key is not Valid
// and the Secrets' state is unknown. Any other error fails: the explanation would be wrong.
func (e *Explainer) readKey(ctx context.Context, c client.Reader, ns string) (hash.Key, error) {
	if e.conf.IgnoredSources[source.Secret] {
		return hash.Key{}, nil // no Secret reloads anything: their hashes are never weighed
	}
	k, err := hashkey.Read(ctx, c, ns)
	var why string
	switch {
	case err == nil:
		return k, nil
	case apierrors.IsForbidden(err):
		why = "you may not read reloader's Secret hash key " + ns + "/" + hashkey.SecretName + ", and need not: it is reloader's alone"
	case apierrors.IsNotFound(err):
		why = "there is no Secret hash key " + ns + "/" + hashkey.SecretName + " (if reloader runs in another namespace, pass --reloader-namespace)"
	default:
		return hash.Key{}, fmt.Errorf("read reloader's Secret hash key (--reloader-namespace %s): %w", ns, err)
	}
	e.unknownHash[source.Secret] = true
	e.keyNote = "Secret hashes can't be computed without reloader's hash key: " + why
	return hash.Key{}, nil
}

// readLedger reads the namespace's first records from reloader's ledger in ns (reloader's own
// namespace, where its key lives): a workload reloader has seen but not reloaded has its record
// there, not on itself. A user who may not read it is told that such workloads are explained as
// not recorded yet.
func (e *Explainer) readLedger(ctx context.Context, c client.Reader, ns string) error {
	if !e.conf.FirstRecordLedger {
		return nil
	}
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ledger.Name(e.namespace)}, cm)
	switch {
	case err == nil:
		e.ledger = ledger.Static(ns, cm)
	case apierrors.IsNotFound(err):
		e.ledger = ledger.Static(ns)
	case apierrors.IsForbidden(err):
		e.ledgerNote = "first records kept in reloader's ledger (" + ns + "/" + ledger.Name(e.namespace) + ") can't be read here: the workload, without a record annotation, is explained as not recorded yet"
	default:
		return fmt.Errorf("read reloader's ledger of first records %s/%s: %w", ns, ledger.Name(e.namespace), err)
	}
	return nil
}

// unknown stands for a hash that can't be computed here.
const unknown = "unknown"

func (e *Explainer) reconciler(kind workload.Kind) *controller.WorkloadReconciler {
	r := e.bare(kind)
	r.Gates = app.Gates(e.guardrailsOf()) // the controller's gates, run dry
	return r
}

// bare is the reconciler of kind as the controller builds it, without its gates.
func (e *Explainer) bare(kind workload.Kind) *controller.WorkloadReconciler {
	r := app.NewReconciler(e.conf, e.client, kind, e.sources, e.configs, coalesce.New(e.conf.CoalesceWindow))
	r.Now, r.Policy.Caches, r.Baselines, r.Ledger = e.now, e.caches, e.baselines, e.ledger
	return r
}

// guardrailsOf are the gates as the controller builds them, but for its memory: no flap
// table (the quarantines recorded on the workloads are read), and waves over the kinds this
// install reloads that the cluster serves, read whole, statuses included, once per
// explanation.
func (e *Explainer) guardrailsOf() app.Guardrails {
	if e.guardrails == nil {
		var members []*controller.WorkloadReconciler
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, k := range e.workloadKinds() {
			if e.ignoredKind(k) != "" || e.client.List(ctx, k.NewList(), client.InNamespace(e.namespace), client.Limit(1)) != nil {
				continue // not reloaded here, or not served: no member of any wave
			}
			members = append(members, e.bare(k))
		}
		g := app.NewGuardrails(e.conf, app.GuardrailsFrom{Cluster: controller.WaveCluster(members), Caches: e.caches})
		g.Wave.Memoize() // one view of the cluster for every workload explained
		e.guardrails = &g
	}
	return *e.guardrails
}

func (e *Explainer) lookup() lookup.Lookup {
	return app.NewLookup(e.conf, e.client, e.sources, e.configs)
}

// Workload explains the workload kind/name.
func (e *Explainer) Workload(ctx context.Context, kind workload.Kind, name string) (*Workload, error) {
	obj := kind.NewObject()
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: e.namespace, Name: name}, obj); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil, fmt.Errorf("%s: this cluster does not serve the kind", kind.Name())
		}
		return nil, fmt.Errorf("get %s %s/%s: %w", kind.Name(), e.namespace, name, err)
	}
	ex, err := e.reconciler(kind).Explain(ctx, obj, controller.Supposed{UnknownHash: e.unknownHash})
	if err != nil {
		return nil, err
	}
	w := e.workload(kind, obj, ex)
	if w.Events, err = e.events(ctx, kind, name); err != nil {
		w.Notes = append(w.Notes, err.Error())
	}
	return w, nil
}

// Source lists the workloads of every kind this install reloads that a change of source
// kind/name would reload, found as the controller finds them, each explained.
func (e *Explainer) Source(ctx context.Context, kind source.Kind, name string) (*Source, error) {
	st, ok := e.sourceType(kind)
	if !ok {
		return nil, fmt.Errorf("%ss can't be read: %s", kind.Title(), strings.Join(e.notes, "; "))
	}
	id := source.ID{Kind: kind, Name: name}
	out := &Source{Kind: kind.Title(), Namespace: e.namespace, Name: name, Notes: slices.Clone(e.notes), Workloads: []AffectedWorkload{}}
	if kind == source.Secret && e.keyNote != "" {
		out.Notes = append(out.Notes, e.keyNote)
	}
	obj := st.NewObject()
	err := e.client.Get(ctx, client.ObjectKey{Namespace: e.namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		obj = nil
		out.Notes = append(out.Notes, fmt.Sprintf("%s %s/%s does not exist; listing the workloads its creation would concern", kind.Title(), e.namespace, name))
	case err != nil:
		return nil, fmt.Errorf("get %s %s/%s: %w", kind.Title(), e.namespace, name, err)
	default:
		out.Exists = true
		out.Hash = unknown
		if !e.unknownHash[kind] {
			out.Hash = st.Hash(obj)
		}
	}
	var annotations, labels map[string]string
	if obj != nil {
		annotations, labels = obj.GetAnnotations(), obj.GetLabels()
	}
	for _, wk := range allKinds() {
		if e.ignoredKind(wk) != "" {
			continue // never reloaded by this install
		}
		if err := e.client.List(ctx, wk.NewList(), client.InNamespace(e.namespace), client.Limit(1)); err != nil {
			if !apimeta.IsNoMatchError(err) {
				out.Notes = append(out.Notes, fmt.Sprintf("%ss not searched: %v", wk.Name(), err))
			}
			continue
		}
		r := e.reconciler(wk)
		for _, w := range e.lookup().Affected(ctx, wk, e.namespace, id, annotations, labels) {
			ex, err := r.Explain(ctx, w, controller.Supposed{UnknownHash: e.unknownHash})
			if err != nil {
				return nil, err
			}
			ew := e.workload(wk, w, ex)
			a := AffectedWorkload{Kind: wk.Name(), Name: w.GetName(), Next: ew.Next}
			for _, s := range ew.Sources {
				if s.Kind == kind.Title() && s.Name == name {
					a.Reason = s.Reason
				}
			}
			out.Workloads = append(out.Workloads, a)
		}
	}
	slices.SortFunc(out.Workloads, func(a, b AffectedWorkload) int {
		if a.Kind != b.Kind {
			return strings.Compare(a.Kind, b.Kind)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

func (e *Explainer) sourceType(kind source.Kind) (sourcecache.SourceType, bool) {
	for _, st := range e.sources {
		if st.Kind == kind {
			return st, true
		}
	}
	return sourcecache.SourceType{}, false
}
