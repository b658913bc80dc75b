package clientindex

import (
	"context"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReuseLists lets lookups by index within d of a list of the same kind, namespace and
// server-side selectors share that list instead of asking the API server again. Reloader's
// degraded mode looks up the workloads of a namespace several times per source change (per
// kind, by name and by pattern, for the reload and for its baseline), and a burst of changes
// in one namespace repeats it per change: they share one list per kind while it is fresh.
// What a shared list may miss is a workload created within d before a lookup. Lists made
// without an indexed field are never shared.
func (c *Client) ReuseLists(d time.Duration) {
	c.lists = &recentLists{ttl: d, now: time.Now, m: map[listKey]recentList{}}
}

type listKey struct {
	gvk  schema.GroupVersionKind
	opts string // the server-side list options, namespace included
}

type recentList struct {
	at    time.Time
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
		if items, ok := c.lists.get(key); ok {
			return items, nil
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
		c.lists.put(key, items)
	}
	return items, nil
}

func (r *recentLists) get(k listKey) ([]runtime.Object, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.m[k]
	if !ok || r.now().Sub(l.at) >= r.ttl {
		return nil, false
	}
	return l.items, true
}

// put keeps items and drops the lists gone stale, so that what is kept is bounded by the
// namespaces looked up within the last ttl.
func (r *recentLists) put(k listKey, items []runtime.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for key, l := range r.m {
		if now.Sub(l.at) >= r.ttl {
			delete(r.m, key)
		}
	}
	r.m[k] = recentList{at: now, items: items}
}
