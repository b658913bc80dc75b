package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// pendingJob is a replacement deleted-for but not yet created.
type pendingJob struct {
	obj      client.Object
	replaces types.UID
}

// pendingJobs holds replacements until they are created, so that a failed create is retried
// instead of losing the Job.
type pendingJobs struct {
	mu sync.Mutex
	m  map[types.NamespacedName]pendingJob
}

func (p *pendingJobs) get(nn types.NamespacedName) (pendingJob, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.m[nn]
	return j, ok
}

func (p *pendingJobs) put(nn types.NamespacedName, j pendingJob) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[types.NamespacedName]pendingJob{}
	}
	p.m[nn] = j
}

func (p *pendingJobs) done(nn types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, nn)
}

// replace deletes the old object, if it is still the one read, and creates its replacement.
func (r *WorkloadReconciler) replace(ctx context.Context, old, fresh client.Object) error {
	uid, rv := old.GetUID(), old.GetResourceVersion()
	err := r.Client.Delete(ctx, old, client.Preconditions{UID: &uid, ResourceVersion: &rv},
		client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete for replacement: %w", err)
	}
	nn := client.ObjectKeyFromObject(old)
	r.jobs.put(nn, pendingJob{obj: fresh, replaces: uid})
	if err := r.Client.Create(ctx, fresh.DeepCopyObject().(client.Object), client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("re-create after delete (kept, retrying): %w", err)
	}
	r.jobs.done(nn)
	return nil
}

// createReplacement retries a replacement whose create failed. current is what the cache
// holds under the name, if anything.
func (r *WorkloadReconciler) createReplacement(ctx context.Context, nn types.NamespacedName, p pendingJob, current client.Object, exists bool) (reconcile.Result, error) {
	if exists && current.GetUID() != p.replaces {
		r.jobs.done(nn) // created meanwhile
		return reconcile.Result{}, nil
	}
	fresh := p.obj.DeepCopyObject().(client.Object)
	err := r.Client.Create(ctx, fresh, client.FieldOwner(FieldOwner))
	switch {
	case err == nil:
		r.jobs.done(nn)
		r.Metrics.Reloaded(r.Kind.Name(), nn.Namespace, true, 0)
		log.FromContext(ctx).Info("re-created after an earlier failure")
		r.Recorder.Eventf(fresh, nil, corev1.EventTypeNormal, ReasonReloaded, "Reload",
			"Re-created %s %s with the new configuration", r.Kind.Name(), nn.Name)
		return reconcile.Result{}, nil
	case apierrors.IsAlreadyExists(err):
		// The old object is still terminating, or a replacement exists that the cache has not
		// shown yet; the next pass tells which, by UID, at the top of this function.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	r.Recorder.Eventf(p.obj, nil, corev1.EventTypeWarning, ReasonReloadFail, "Reload",
		"%s %s was deleted for a reload but could not be re-created; retrying: %v", r.Kind.Name(), nn.Name, err)
	return reconcile.Result{}, fmt.Errorf("re-create %s: %w", nn, err)
}
