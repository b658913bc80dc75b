package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/workload"
)

// served is the set of kinds the API server serves.
type served struct {
	kinds  map[schema.GroupVersionKind]bool
	scheme *runtime.Scheme
}

// optionalAPI is an API reloader uses when the cluster serves it.
type optionalAPI struct {
	gv schema.GroupVersion
	// asked: a flag asks for it (--is-Argo-Rollouts, --enable-csi-integration,
	// --is-openshift=true); else it is found by discovery alone.
	asked bool
}

// optionalAPIs are the optional APIs conf may use, and whether conf asks for each.
func optionalAPIs(conf options.Config) []optionalAPI {
	apis := []optionalAPI{{gv: v1alpha1.GroupVersion}}
	for _, k := range conf.KnownKinds() {
		want, asked := conf.WantsWorkload(k)
		gv := k.Describe().Resource.GroupVersion()
		if want && k.Describe().Gate != workload.Always && !slices.ContainsFunc(apis, func(a optionalAPI) bool { return a.gv == gv }) {
			apis = append(apis, optionalAPI{gv: gv, asked: asked})
		}
	}
	if conf.EnableCSIIntegration {
		apis = append(apis, optionalAPI{gv: extapi.CSIGroupVersion, asked: true})
	}
	return apis
}

// discoveryBackoff spreads the attempts to discover the optional APIs over about half a
// minute (waits of 1s, 2s, 4s, 8s, 15s) before reloader gives up on one that fails to answer.
func discoveryBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Steps: 6, Cap: 15 * time.Second}
}

// discover asks the API server which kinds of the optional APIs it serves. A group that is
// not served (not listed, or NotFound) is absent. One that is listed but fails to answer (an
// aggregated API whose backend is down, a 5xx, a timeout) is asked again with backoff; if it
// still fails, an API a flag asks for stops start-up with an error (restarting later is
// reloader's retry), and one found by discovery alone is taken as absent with a warning.
func discover(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, apis []optionalAPI, backoff wait.Backoff, logger logr.Logger) (served, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return served{}, fmt.Errorf("discovery client: %w", err)
	}
	var lists []*metav1.APIResourceList
	var failed map[schema.GroupVersion]error
	var whole error
	attempt := 0
	err = wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		attempt++
		lists, failed, whole = discoverOnce(dc, apis)
		if whole == nil && len(failed) == 0 {
			return true, nil
		}
		logger.Info("API discovery failed; retrying", "attempt", attempt, "error", describeFailure(whole, failed))
		return false, nil
	})
	if err != nil && !wait.Interrupted(err) {
		return served{}, err
	}
	if ctx.Err() != nil {
		return served{}, ctx.Err()
	}
	if whole != nil {
		return served{}, fmt.Errorf("%w (%d attempts)", whole, attempt)
	}
	if len(failed) > 0 {
		var errs []error
		for _, a := range apis {
			cause, ok := failed[a.gv]
			if !ok {
				continue
			}
			if a.asked {
				errs = append(errs, fmt.Errorf("discovery of %s failed %d times (%v): reloader can't tell whether the API is served; check `kubectl get apiservices %s.%s`, or leave out the flag that asks for it",
					a.gv, attempt, cause, a.gv.Version, a.gv.Group))
				continue
			}
			logger.Info(fmt.Sprintf("WARNING: discovery of %s failed %d times (%v); taken as not served, so its kinds are not watched until reloader restarts", a.gv, attempt, cause))
		}
		if len(errs) > 0 {
			return served{}, errors.Join(errs...)
		}
	}
	s := served{kinds: map[schema.GroupVersionKind]bool{}, scheme: scheme}
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

// discoverOnce lists the served resources; failed holds the groups of apis that were listed
// but did not answer. A failure of any other group is no concern of reloader's. err is set
// when discovery as a whole failed (say, the API server did not answer); then failed holds
// every one of apis.
func discoverOnce(dc discovery.DiscoveryInterface, apis []optionalAPI) ([]*metav1.APIResourceList, map[schema.GroupVersion]error, error) {
	_, lists, err := dc.ServerGroupsAndResources()
	failed := map[schema.GroupVersion]error{}
	if err == nil {
		return lists, failed, nil
	}
	groups, partial := discovery.GroupDiscoveryFailedErrorGroups(err)
	if !partial {
		for _, a := range apis {
			failed[a.gv] = err
		}
		return lists, failed, fmt.Errorf("discover API resources: %w", err)
	}
	for _, a := range apis {
		if cause, ok := groups[a.gv]; ok && !apierrors.IsNotFound(cause) {
			failed[a.gv] = cause
		}
	}
	return lists, failed, nil
}

// describeFailure is one line on what failed.
func describeFailure(err error, failed map[schema.GroupVersion]error) string {
	if err != nil {
		return err.Error()
	}
	var parts []string
	for gv, cause := range failed {
		parts = append(parts, fmt.Sprintf("%s: %v", gv, cause))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

func (s served) has(obj client.Object) bool {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	return err == nil && s.kinds[gvk]
}
