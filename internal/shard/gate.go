package shard

import "time"

// NotListedRetry is how soon a reconcile in a namespace whose shard was just taken comes back
// while the informers have not listed it yet.
const NotListedRetry = 500 * time.Millisecond

// Gate tells a reconcile of an object in namespace whether this replica goes on: skip when
// the namespace is another replica's, wait when its shard was taken and not every informer has
// listed it yet. ready is Filter.Ready; nil (no sharding) always goes on.
func Gate(ready func(namespace string) (own, listed bool), namespace string) (skip bool, wait time.Duration) {
	if ready == nil {
		return false, 0
	}
	switch own, listed := ready(namespace); {
	case !own:
		return true, 0
	case !listed:
		return false, NotListedRetry
	}
	return false, 0
}
