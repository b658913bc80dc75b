// Package hashkey keeps the install's Secret hash key: 32 random bytes in a Secret in
// reloader's own namespace, created by the first replica that starts and read by every
// other, so that all replicas, and every restart, hash a Secret the same way.
package hashkey

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
)

// SecretName names the key's Secret. RBAC grants reloader get on this name only.
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

// Loader loads the key in the background, retrying until it succeeds: a replica without the
// RBAC or the API server it needs at start-up waits, unready (its Secret cache does not sync),
// instead of exiting.
type Loader struct {
	ctx  context.Context
	done chan struct{}
	key  hash.Key
}

// Setup finds the key's namespace and starts loading the key there with a client of its own,
// since it runs before reloader's manager and cache exist.
func Setup(ctx context.Context, cfg *rest.Config, reloaderNamespace string, watched []string, logger logr.Logger) (*Loader, error) {
	ns, own := Namespace(reloaderNamespace, watched)
	if !own {
		logger.Info("no namespace of reloader's own (RELOADER_NAMESPACE, POD_NAMESPACE): keeping the Secret hash key in "+ns,
			"secret", ns+"/"+SecretName)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	l := &Loader{ctx: ctx, done: make(chan struct{})}
	go func() {
		wait := time.Second
		for {
			k, err := Load(ctx, c, ns)
			if err == nil {
				l.key = k
				close(l.done)
				logger.Info("Secret hash key loaded", "secret", ns+"/"+SecretName, "keyID", k.ID())
				return
			}
			if apierrors.IsForbidden(err) {
				// RBAC made for upstream (a drop-in swap of the image) grants no access to the
				// key. Reloading must go on: Secrets are hashed as before the install key,
				// keyed by their UID, until reloader runs with the key's RBAC.
				close(l.done)
				logger.Info("WARNING: no access to the Secret hash key; hashing Secrets keyed by their UID instead, as releases before the key did. Grant get on secrets/"+SecretName+" and create on secrets in "+ns+" (the chart does) and restart reloader",
					"secret", ns+"/"+SecretName, "error", err.Error())
				return
			}
			logger.Error(err, "loading the Secret hash key; Secrets are not watched until it loads", "retryIn", wait.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 30*time.Second)
		}
	}()
	return l, nil
}

// Wait blocks until the key is loaded, or fails when the context of Setup ends first.
func (l *Loader) Wait() error {
	select {
	case <-l.done:
		return nil
	case <-l.ctx.Done():
		return fmt.Errorf("Secret hash key not loaded: %w", l.ctx.Err())
	}
}

// Key is the loaded key once Wait has returned nil; a key that is not Valid when reloader may
// not read or create the key's Secret (hash.Secret then keys by UID).
func (l *Loader) Key() hash.Key { return l.key }

// Load reads the key from its Secret in ns, creating the Secret first if there is none. Two
// replicas starting at once may both try to create it: the loser reads the winner's. c must
// read from the API server, not from reloader's cache, which keeps only keyed digests of
// Secret data.
func Load(ctx context.Context, c client.Client, ns string) (hash.Key, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: SecretName}, s)
	if apierrors.IsNotFound(err) {
		s, err = create(ctx, c, ns)
		if apierrors.IsAlreadyExists(err) {
			s = &corev1.Secret{}
			err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: SecretName}, s)
		}
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

func create(ctx context.Context, c client.Client, ns string) (*corev1.Secret, error) {
	b := make([]byte, hash.KeySize)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SecretName,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "reloader"},
			Annotations: map[string]string{
				"reloader.dev/purpose": "Key of the Secret hashes reloader writes into pod templates. Deleting it re-bases every recorded Secret hash at reloader's next start: no rollout, but a Secret change made while reloader restarts is missed.",
			}},
		Type:      corev1.SecretTypeOpaque,
		Data:      map[string][]byte{dataKey: b},
		Immutable: ptr.To(true),
	}
	if err := c.Create(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}
