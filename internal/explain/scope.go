package explain

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/sourcecache"
)

// scoped hides from the decision the sources reloader's cache never holds, so that explain
// sees what the controller sees: sources outside --resource-label-selector, and service
// account token Secrets (the controller's watch leaves them out).
type scoped struct {
	client.Client
	// selector is --resource-label-selector; nil selects all.
	selector labels.Selector
	// cache: c reads reloader's own cache, which selected its sources already (and may have
	// dropped their labels); only the full objects beside them (proposed ones) are judged.
	cache bool
}

func scopeSources(c client.Client, conf options.Config) client.Client {
	return scoped{Client: c, selector: conf.SourceLabels}
}

// scopeCached is scopeSources over reloader's cache.
func scopeCached(c client.Client, conf options.Config) client.Client {
	return scoped{Client: c, selector: conf.SourceLabels, cache: true}
}

func (s scoped) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := s.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if isSource(obj) && s.hidden(obj) {
		return apierrors.NewNotFound(corev1.Resource("source"), key.Name)
	}
	return nil
}

func (s scoped) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if !isSource(list) {
		return s.Client.List(ctx, list, opts...)
	}
	if s.selector != nil && !s.cache {
		opts = append(opts, client.MatchingLabelsSelector{Selector: s.selector})
	}
	if err := s.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*corev1.SecretList); ok {
		kept := l.Items[:0]
		for _, item := range l.Items {
			if !s.hidden(&item) {
				kept = append(kept, item)
			}
		}
		l.Items = kept
	}
	if l, ok := list.(*corev1.ConfigMapList); ok && s.cache {
		kept := l.Items[:0]
		for _, item := range l.Items {
			if !s.hidden(&item) {
				kept = append(kept, item)
			}
		}
		l.Items = kept
	}
	return nil
}

func (s scoped) hidden(obj client.Object) bool {
	if s.cache && sourcecache.FromCache(obj) {
		return false
	}
	if sec, ok := obj.(*corev1.Secret); ok && sec.Type == corev1.SecretTypeServiceAccountToken {
		return true
	}
	return s.selector != nil && !s.selector.Matches(labels.Set(obj.GetLabels()))
}

// isSource reports whether o is a ConfigMap or Secret, or a list of them.
func isSource(o runtime.Object) bool {
	switch o.(type) {
	case *corev1.ConfigMap, *corev1.Secret, *corev1.ConfigMapList, *corev1.SecretList:
		return true
	}
	return false
}
