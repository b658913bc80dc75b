package clientindex

import (
	"context"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReuseLists lets lookups by index within d of a list of the same kind, namespace and
// server-side selectors share that list instead of asking the API server again. Reloader's
// degraded mode looks up the workloads of a namespace several times per source change (per
// kind, by name and by pattern, for the reload and for its baseline), and a burst of changes
// in one namespace repeats it per change: they share one list per kind while it is fresh.
// A lookup made for a change (AtLeast) shares only a list taken at the change's
// resourceVersion or later, so that it sees every workload created before the change. Lists
// made without an indexed field are never shared.
func (c *Client) ReuseLists(d time.Duration) {
	c.lists = &recentLists{ttl: d, now: time.Now, m: map[listKey]recentList{}}
}

type atLeastKey struct{}

// AtLeast returns ctx for lookups that must see the cluster as of resourceVersion rv or later
// (that of the source change they are made for): a shared list taken before rv may lack a
// workload created just before the change, which would then never hear of it.
func AtLeast(ctx context.Context, rv string) context.Context {
	return context.WithValue(ctx, atLeastKey{}, rv)
}

// fresh reports whether a list taken at resourceVersion listRV may serve a lookup with ctx.
// Versions that do not compare (no etcd behind the server) share nothing.
func fresh(ctx context.Context, listRV string) bool {
	min, _ := ctx.Value(atLeastKey{}).(string)
	if min == "" {
		return true
	}
	c, err := resourceversion.CompareResourceVersion(listRV, min)
	return err == nil && c >= 0
}

type listKey struct {
	gvk  schema.GroupVersionKind
	opts string // the server-side list options, namespace included
}

type recentList struct {
	at    time.Time
	rv    string
	items []runtime.Object
}

type recentLists struct {
	ttl time.Duration
	now func() time.Time
	mu  sync.Mutex
	m   map[listKey]recentList
}

// listServer lists from the API server, or from a fresh list when ReuseLists is on. The items
// returned are shared: callers filter them into their own list and must not change them.
func (c *Client) listServer(ctx context.Context, gvk schema.GroupVersionKind, list client.ObjectList, opts *client.ListOptions) ([]runtime.Object, error) {
	var key listKey
	if c.lists != nil {
		key = listKey{gvk: gvk, opts: opts.AsListOptions().String() + "/" + opts.Namespace}
		if l, ok := c.lists.get(key); ok && fresh(ctx, l.rv) {
			return l.items, nil
		}
	}
	if err := c.Client.List(ctx, list, opts); err != nil {
		return nil, err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	if c.lists != nil {
		rv := ""
		if m, err := apimeta.ListAccessor(list); err == nil {
			rv = m.GetResourceVersion()
		}
		c.lists.put(key, rv, items)
	}
	return items, nil
}

func (r *recentLists) get(k listKey) (recentList, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.m[k]
	if !ok || r.now().Sub(l.at) >= r.ttl {
		return recentList{}, false
	}
	return l, true
}

// put keeps items and drops the lists gone stale, so that what is kept is bounded by the
// namespaces looked up within the last ttl.
func (r *recentLists) put(k listKey, rv string, items []runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for key, l := range r.m {
		if now.Sub(l.at) >= r.ttl {
			delete(r.m, key)
		}
	}
	r.m[k] = recentList{at: now, rv: rv, items: items}
}
