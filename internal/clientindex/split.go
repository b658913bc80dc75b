package clientindex

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Split is a client whose reads of some kinds go to the API server (through Live, with its
// client-side indexes) and every other read, and every write, to the embedded client (the
// manager's, which reads from its cache). Reloader uses it for the kinds its RBAC lets it
// list and get but not watch: they have no informer, so the cache can't answer for them.
type Split struct {
	client.Client
	// Live reads the kinds in live; register their indexes on it.
	Live *Client
	live map[schema.GroupVersionKind]bool
}

// NewSplit returns a client that reads objects of the kinds of live (each a typed object,
// such as &appsv1.Deployment{}) through direct, with indexes, and everything else through
// cached.
func NewSplit(cached, direct client.Client, live ...client.Object) (*Split, error) {
	s := &Split{Client: cached, Live: New(direct), live: map[schema.GroupVersionKind]bool{}}
	for _, o := range live {
		gvk, err := apiutil.GVKForObject(o, cached.Scheme())
		if err != nil {
			return nil, err
		}
		s.live[gvk] = true
	}
	return s, nil
}

// Get implements client.Reader.
func (s *Split) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if s.isLive(obj) {
		return s.Live.Get(ctx, key, obj, opts...)
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (s *Split) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if s.isLive(list) {
		return s.Live.List(ctx, list, opts...)
	}
	return s.Client.List(ctx, list, opts...)
}

// isLive reports whether o, an object or a list, is of a kind read live.
func (s *Split) isLive(o runtime.Object) bool {
	if len(s.live) == 0 {
		return false
	}
	gvk, err := apiutil.GVKForObject(o, s.Scheme())
	if err != nil {
		return false
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return s.live[gvk]
}
