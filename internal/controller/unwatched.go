package controller

import crsource "sigs.k8s.io/controller-runtime/pkg/source"

// live reports whether r.Kind is read without watch (degraded mode, lookup.Unwatched).
func (r *WorkloadReconciler) live() bool { return r.Unwatched.Has(r.Kind.Name()) }

// firstList queues every workload of r.Kind once, when the controller starts.
func (r *WorkloadReconciler) firstList() crsource.Source {
	return r.Unwatched.FirstList(r.Kind, r.Client)
}
