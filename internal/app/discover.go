package app

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// served is the set of kinds the API server serves.
type served struct {
	kinds  map[schema.GroupVersionKind]bool
	scheme *runtime.Scheme
}

// discover asks the API server which kinds of the optional APIs it serves.
func discover(cfg *rest.Config, scheme *runtime.Scheme) (served, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return served{}, fmt.Errorf("discovery client: %w", err)
	}
	s := served{kinds: map[schema.GroupVersionKind]bool{}, scheme: scheme}
	// A group that fails to answer is treated as absent; the built-in groups are not asked for.
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return served{}, fmt.Errorf("discover API resources: %w", err)
	}
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			s.kinds[gv.WithKind(r.Kind)] = true
		}
	}
	return s, nil
}

func (s served) has(obj client.Object) bool {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	return err == nil && s.kinds[gvk]
}
