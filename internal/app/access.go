package app

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/rbac"
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

// jobReloadRules are what a Job's reload takes beside reading Jobs: the Job deleted and created
// again, its replacement written down first as a ControllerRevision, watched, signed and
// dropped (the chart grants them with reloader.reloadJobs).
var jobReloadRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "delete"}},
	{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
}

// checkJobRights asks, when Jobs are reloaded, whether reloader may do what a Job's reload
// takes where it watches. missing says what it lacks and what to do, for a log line and an
// Event (reloader runs on: each Job reload fails with ReloadFail until granted); records is
// false when the replacement records can't even be watched (then they are not, so that the
// cache syncs).
func checkJobRights(ctx context.Context, cfg *rest.Config, conf options.Config) (records bool, missing string, err error) {
	var lacking []string
	for _, r := range jobReloadRules {
		ok, err := allowed(ctx, cfg, r.APIGroups[0], r.Resources[0], conf.Namespaces, r.Verbs...)
		if err != nil {
			return false, "", err
		}
		if !ok {
			lacking = append(lacking, "{"+rbac.Format(r)+"}")
		}
	}
	records, err = allowed(ctx, cfg, "apps", "controllerrevisions", conf.Namespaces, "list", "watch")
	if err != nil || len(lacking) == 0 {
		return records, "", err
	}
	return records, "Job reloads are on (jobs are not in --ignored-workload-types) but reloader's RBAC lacks " +
		strings.Join(lacking, ", ") + ": each Job reload fails with a ReloadFail Event until they are granted " +
		"(chart: reloader.reloadJobs=true), or Jobs are left alone (--ignored-workload-types=jobs)", nil
}
