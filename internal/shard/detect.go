package shard

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Mode is how the slice reaches the cache.
type Mode string

const (
	// ServerSide: the API server applies the shardSelector (ShardedListAndWatch is on), so only
	// the slice crosses the wire.
	ServerSide Mode = "server"
	// ClientSide: the server ignores the selector; the informers drop other namespaces on
	// arrival, with the same hash, so the cache still holds only the slice.
	ClientSide Mode = "client"
)

// Detect asks the API server once whether it applies shard selectors: a list that carries one
// comes back with shardInfo only where the feature gate is on. The list is of this install's
// member Leases, one item at most.
func Detect(ctx context.Context, leases coordinationv1client.LeasesGetter, namespace string) (Mode, error) {
	list, err := leases.Leases(namespace).List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: GroupLabel,
		ShardSelector: Selector([]string{namespace}).String()})
	if err != nil {
		return "", err
	}
	if list.ShardInfo != nil {
		return ServerSide, nil
	}
	return ClientSide, nil
}
