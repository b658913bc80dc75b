// Package clientindex lets code written against a cache's field indexes run on a direct API
// client: the same index functions are registered here, and a List that asks for an indexed
// field lists the namespace and applies them client-side. `reloader explain` uses it so that
// the controller's own lookups run unchanged without informers.
package clientindex

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Client is a client.Client that is also a client.FieldIndexer.
type Client struct {
	client.Client
	indexes map[schema.GroupVersionKind]map[string]client.IndexerFunc
	// lists, when set (ReuseLists), answers lookups by index from a recent list.
	lists *recentLists
}

// New wraps c; register the indexes with IndexField before listing by them.
func New(c client.Client) *Client {
	return &Client{Client: c, indexes: map[schema.GroupVersionKind]map[string]client.IndexerFunc{}}
}

// IndexField implements client.FieldIndexer.
func (c *Client) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return fmt.Errorf("index %s: %w", field, err)
	}
	if c.indexes[gvk] == nil {
		c.indexes[gvk] = map[string]client.IndexerFunc{}
	}
	c.indexes[gvk][field] = fn
	return nil
}

// List lists from the API server; requirements on registered fields are left out of the
// request and applied to the items with the index functions, as a cache would.
func (c *Client) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.FieldSelector == nil || o.FieldSelector.Empty() {
		return c.Client.List(ctx, list, opts...)
	}
	gvk, err := apiutil.GVKForObject(list, c.Scheme())
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	indexes := c.indexes[gvk]
	var local, remote []fields.Requirement
	for _, req := range o.FieldSelector.Requirements() {
		if indexes[req.Field] == nil {
			remote = append(remote, req)
			continue
		}
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals {
			return fmt.Errorf("index %s of %s: only equality can be listed, not %s", req.Field, gvk.Kind, req.Operator)
		}
		local = append(local, req)
	}
	if len(local) == 0 {
		return c.Client.List(ctx, list, opts...)
	}
	server := *o
	server.FieldSelector = nil
	if len(remote) > 0 {
		server.FieldSelector = fields.AndSelectors(selectors(remote)...)
	}
	items, err := c.listServer(ctx, gvk, list, &server)
	if err != nil {
		return err
	}
	kept := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		if obj, ok := item.(client.Object); ok && matches(obj, indexes, local) {
			kept = append(kept, item)
		}
	}
	return apimeta.SetList(list, kept)
}

func matches(obj client.Object, indexes map[string]client.IndexerFunc, reqs []fields.Requirement) bool {
	for _, req := range reqs {
		if !slices.Contains(indexes[req.Field](obj), req.Value) {
			return false
		}
	}
	return true
}

func selectors(reqs []fields.Requirement) []fields.Selector {
	out := make([]fields.Selector, len(reqs))
	for i, r := range reqs {
		out[i] = fields.OneTermEqualSelector(r.Field, r.Value)
		if r.Operator == selection.NotEquals {
			out[i] = fields.OneTermNotEqualSelector(r.Field, r.Value)
		}
	}
	return out
}

var _ client.FieldIndexer = (*Client)(nil)
