// Package hashkey keeps the install's Secret hash key: 32 random bytes in a Secret in
// reloader's own namespace, created by the first replica that starts and read by every
// other, so that all replicas, and every restart, hash a Secret the same way.
package hashkey

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/coreevents"
	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/metainfo"
	"github.com/reloader-operator/reloader/internal/metrics"
	"github.com/reloader-operator/reloader/internal/termsafe"
)

// SecretName names the key's Secret. RBAC grants reloader create, get and patch on this name
// only.
const SecretName = "reloader-hash-key"

// dataKey holds the key's bytes in the Secret.
const dataKey = "key"

// FallbackNamespace holds the key when reloader has no namespace of its own and watches all
// namespaces.
const FallbackNamespace = "default"

// Namespace says where the key lives: reloader's own namespace (RELOADER_NAMESPACE, else
// POD_NAMESPACE), else the first in name order of those it watches (--namespaces, in any
// order), else FallbackNamespace. own is false for the fallbacks, which a run outside the
// cluster (`reloader --kubeconfig`) gets; they are stable across restarts, which a
// per-process key would not be: every restart would re-base every Secret hash and miss the
// changes made meanwhile.
func Namespace(reloaderNamespace string, watched []string) (ns string, own bool) {
	switch {
	case reloaderNamespace != "":
		return reloaderNamespace, true
	case len(watched) > 0:
		return slices.Min(watched), false
	}
	return FallbackNamespace, false
}

// DefaultForbiddenFor is how long a refused read of the key is retried before reloader falls
// back to UID-keyed hashes: long enough for a RoleBinding applied just after the Deployment.
const DefaultForbiddenFor = 2 * time.Minute

// Options configure Setup.
type Options struct {
	// Namespace is reloader's own namespace (RELOADER_NAMESPACE, else POD_NAMESPACE);
	// Watched are the namespaces of --namespaces. Together they place the key (Namespace).
	Namespace string
	Watched   []string
	// Pod and Deployment name reloader's own Pod and Deployment in Namespace, if known: the
	// fallback's Warning Event is about the first known of them, else the meta-info ConfigMap.
	Pod, Deployment string
	// ForbiddenFor bounds the retries of a refused read (403); DefaultForbiddenFor when 0.
	ForbiddenFor time.Duration
	// Registry receives the reloader_hash_key_fallback gauge: controller-runtime's metrics
	// registry in reloader.
	Registry prometheus.Registerer
}

// Loader loads the key in the background, retrying until it succeeds: a replica without the
// RBAC or the API server it needs at start-up waits, unready (its Secret cache does not sync),
// instead of exiting.
type Loader struct {
	ctx  context.Context
	done chan struct{}
	key  hash.Key
	// own is false when the key lives in a namespace that is not reloader's own (Namespace).
	own bool
	// fallback is 1 once Secrets are hashed keyed by UID, for want of access to the key.
	fallback prometheus.Gauge
}

// Setup finds the key's namespace and starts loading the key there with a client of its own,
// since it runs before reloader's manager and cache exist.
func Setup(ctx context.Context, cfg *rest.Config, o Options, logger logr.Logger) (*Loader, error) {
	ns, own := Namespace(o.Namespace, o.Watched)
	if !own {
		logger.Info("no namespace of reloader's own (RELOADER_NAMESPACE, POD_NAMESPACE): keeping the Secret hash key in "+ns,
			"secret", ns+"/"+SecretName)
	}
	if o.ForbiddenFor <= 0 {
		o.ForbiddenFor = DefaultForbiddenFor
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	l := &Loader{ctx: ctx, done: make(chan struct{}), own: own, fallback: metrics.Register(o.Registry, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "reloader_hash_key_fallback",
		Help: "1 when reloader may not read or create its Secret hash key and hashes Secrets keyed by their UID instead (grant the key's RBAC and restart); 0 once the key is loaded.",
	}))}
	go l.load(ctx, c, ns, o, logger)
	return l, nil
}

// load retries Load with backoff: errors other than a 403 until the context ends; a 403 for
// o.ForbiddenFor, then it falls back.
func (l *Loader) load(ctx context.Context, c client.Client, ns string, o Options, logger logr.Logger) {
	giveUp := time.Now().Add(o.ForbiddenFor)
	secret := ns + "/" + SecretName
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		k, err := Load(ctx, c, ns)
		switch {
		case err == nil:
			l.key = k
			l.fallback.Set(0)
			close(l.done)
			logger.Info("Secret hash key loaded", "secret", secret, "keyID", k.ID())
			return
		case apierrors.IsForbidden(err) && !time.Now().Before(giveUp):
			l.fallBack(ctx, c, ns, o, err, logger)
			return
		case apierrors.IsForbidden(err):
			logger.Info("no access to the Secret hash key yet (RBAC applied after reloader?); Secrets are not watched until it loads or reloader falls back",
				"secret", secret, "retryIn", wait.String(), "fallbackIn", time.Until(giveUp).Round(time.Second).String(), "error", err.Error())
		default:
			logger.Error(err, "loading the Secret hash key; Secrets are not watched until it loads", "retryIn", wait.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// fallBack gives up on the key after a lasting 403. RBAC made for upstream (a drop-in swap of
// the image) grants no access to the key, and reloading must go on: Secrets are hashed as
// before the install key, keyed by their UID, for the life of the process (switching later
// would re-base every Secret hash). The gauge, the Event and the log line let an operator see
// it and grant the RBAC.
func (l *Loader) fallBack(ctx context.Context, c client.Client, ns string, o Options, cause error, logger logr.Logger) {
	l.fallback.Set(1)
	// Told before Wait returns, so that the Event is there when Secrets start to be watched.
	defer close(l.done)
	msg := fmt.Sprintf("No access to the Secret hash key %s/%s: hashing Secrets keyed by their UID instead, as releases before the key did. Grant create, get and patch on secrets named %s in %s (the chart does) and restart reloader.",
		ns, SecretName, SecretName, ns)
	logger.Error(cause, "WARNING: "+msg, "metric", "reloader_hash_key_fallback")
	// Through the core API, as reloader's other Events: upstream's RBAC grants core events.
	if err := c.Create(ctx, coreevents.ToCore(fallbackEvent(ns, o, msg+" Cause: "+cause.Error()))); err != nil {
		logger.Error(err, "could not write the Warning Event about the hash key fallback")
	}
}

// fallbackEvent is the Warning Event of the fallback, about reloader's Pod, else its
// Deployment, else its meta-info ConfigMap: the objects an operator looks at and alerts on.
func fallbackEvent(ns string, o Options, note string) *eventsv1.Event {
	regarding := corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: metainfo.Name}
	switch {
	case o.Namespace != ns:
		// Not reloader's own namespace: its Pod and Deployment are elsewhere, if anywhere.
	case o.Pod != "":
		regarding = corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: o.Pod}
	case o.Deployment != "":
		regarding = corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: o.Deployment}
	}
	instance := o.Pod
	if instance == "" {
		instance = "reloader"
	}
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, GenerateName: SecretName + "-fallback-"},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "reloader.dev/hash-key",
		ReportingInstance:   instance,
		Action:              "LoadHashKey",
		Reason:              FallbackReason,
		Type:                corev1.EventTypeWarning,
		Regarding:           regarding,
		Note:                termsafe.ClipNote(note),
	}
}

// FallbackReason is the reason of the Warning Event written when the key can't be loaded.
const FallbackReason = "HashKeyFallback"

// ErrNotLoaded is the error of Wait, and so of Signing, when ctx ends before the key has
// loaded.
var ErrNotLoaded = errors.New("Secret hash key not loaded yet")

// Wait blocks until the key is loaded, or fails when ctx or the context of Setup ends first
// (ErrNotLoaded for ctx).
func (l *Loader) Wait(ctx context.Context) error {
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotLoaded, ctx.Err())
	case <-l.ctx.Done():
		return fmt.Errorf("Secret hash key not loaded: %w", l.ctx.Err())
	}
}

// Own reports whether the key lives in reloader's own namespace. When it does not (a run
// outside the cluster: the first watched namespace, or default), whoever may read or create
// Secrets there may have read the key, or planted one of their choosing before reloader first
// started: good enough to key Secret hashes, which only decide rollouts, not to trust what it
// signs (Job replacement records).
func (l *Loader) Own() bool { return l.own }

// Key is the loaded key once Wait has returned nil; a key that is not Valid when reloader may
// not read or create the key's Secret (hash.Secret then keys by UID).
func (l *Loader) Key() hash.Key { return l.key }

// Load reads the key from its Secret in ns, creating the Secret first if there is none. c must
// read from the API server, not from reloader's cache, which keeps only keyed digests of
// Secret data.
func Load(ctx context.Context, c client.Client, ns string) (hash.Key, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: SecretName}, s)
	if apierrors.IsNotFound(err) {
		s, err = create(ctx, c, ns)
	}
	if err != nil {
		return hash.Key{}, fmt.Errorf("hash key Secret %s/%s: %w", ns, SecretName, err)
	}
	return keyOf(s)
}

// Read reads the key from its Secret in ns and never creates one: for read-only tools
// (`reloader explain`).
func Read(ctx context.Context, c client.Reader, ns string) (hash.Key, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: SecretName}, s); err != nil {
		return hash.Key{}, fmt.Errorf("hash key Secret %s/%s: %w", ns, SecretName, err)
	}
	return keyOf(s)
}

func keyOf(s *corev1.Secret) (hash.Key, error) {
	k, err := hash.NewKey(s.Data[dataKey])
	if err != nil {
		// Never replaced here: another replica may be hashing with it. Delete it to start over.
		return hash.Key{}, fmt.Errorf("hash key Secret %s/%s: %w; delete it and restart reloader to make a new one", s.Namespace, SecretName, err)
	}
	return k, nil
}

// fieldOwner is reloader's field manager, as the controller's (controller.FieldOwner).
const fieldOwner = "Reloader"

// create makes the key's Secret by a server-side apply, not a POST: RBAC can restrict an
// apply to the Secret's name (create and patch on resourceNames), a POST to no name. Two
// replicas may both find no key and both apply. The Secret is immutable, so the second apply
// can't replace the first one's key: the API server refuses it (Invalid), and the loser
// reads the winner's. The winner re-reads too, so both return what the cluster holds.
func create(ctx context.Context, c client.Client, ns string) (*corev1.Secret, error) {
	b := make([]byte, hash.KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	ac := corev1ac.Secret(SecretName, ns).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": "reloader"}).
		WithAnnotations(map[string]string{
			"reloader.dev/purpose": "Key of the Secret hashes reloader writes into pod templates. Deleting it re-bases every recorded Secret hash at reloader's next start: no rollout, but a Secret change made while reloader restarts is missed.",
		}).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{dataKey: b}).
		WithImmutable(true)
	applyErr := c.Apply(ctx, ac, client.FieldOwner(fieldOwner))
	if applyErr != nil && !apierrors.IsInvalid(applyErr) && !apierrors.IsConflict(applyErr) {
		return nil, applyErr
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: SecretName}, s); err != nil {
		return nil, errors.Join(applyErr, err)
	}
	return s, nil
}
