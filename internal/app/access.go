package app

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// allowed asks the API server whether reloader's own credentials may do each verb on a
// resource ("resource/subresource" for a subresource), in each namespace ("" for all). An install whose RBAC predates a resource (a Role
// written by hand, an older chart) must not leave reloader waiting forever for a cache that
// can't sync: the caller leaves the feature off instead.
func allowed(ctx context.Context, cfg *rest.Config, group, resource string, namespaces []string, verbs ...string) (bool, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, err
	}
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	res, sub, _ := strings.Cut(resource, "/") // "reloaderconfigs/status": a subresource
	for _, ns := range namespaces {
		for _, verb := range verbs {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: res, Subresource: sub}}}
			got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				return false, fmt.Errorf("ask whether %s %s.%s is allowed: %w", verb, resource, group, err)
			}
			if !got.Status.Allowed {
				return false, nil
			}
		}
	}
	return true, nil
}
