// Package writer stores a reload: the guarded patch of a workload (and of the Deployment an
// Argo Rollout refers to), behind one narrow interface that the other writers share (Job
// re-creation in jobreplace, the evict restart in evict). A writer is chosen by the target's
// kind once, when the reconciler is set up; it never sees the reconciler, and what it has to
// say goes through a Reporter.
package writer

import (
	"context"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/reload"
)

// FieldOwner is the field manager of every write, upstream's name.
const FieldOwner = "Reloader"

// Input is what a write stores beside the updated copy of the workload.
type Input struct {
	// Changes are the changes reloaded: none for a write of the record (or a pause) alone.
	Changes []reload.Change
	// Record is the record the write stores; it names the Job a CronJob reload starts.
	Record reload.Record
	// Template is where the workload's pod template was read from (TemplateOf).
	Template Template
	// RunCronJobs is the default of the run-on-reload annotation (a CronJob's reload also
	// starts a Job), with the ReloaderConfigs' overrides applied.
	RunCronJobs bool
}

// Writer stores updated, planned from old (the copy the decision read), as one reload.
type Writer interface {
	Write(ctx context.Context, old, updated client.Object, in Input) error
}

// Resumer is a writer whose work may span reconciles (a Job deleted and not yet re-created).
// The reconciler asks it first, with what the cache holds under the name (exists false when
// nothing): handled is true when it carried on its own work, and the reconcile ends there.
type Resumer interface {
	Resume(ctx context.Context, nn types.NamespacedName, current client.Object, exists bool) (res reconcile.Result, handled bool, err error)
}

// Watcher is a writer that hears of objects of its own (the records of Job replacements).
type Watcher interface {
	Watch(b *builder.Builder) *builder.Builder
}

// Reporter is what a writer tells: Events, its metrics and bad annotations. The reconciler
// gives each writer one: the pipeline's reporter (internal/report), with the counts only
// writers make.
type Reporter interface {
	// Event records an Event about regarding, a Warning when warning is set.
	Event(regarding client.Object, related runtime.Object, warning bool, reason, action, note string)
	// Action counts a write of a kind (reloader_actions_total).
	Action(kind, action string)
	// Invalid reports annotations of obj that could not be parsed; the valid rules apply.
	Invalid(ctx context.Context, obj client.Object, errs ...error)
	// Recreated counts a reload finished by creating the object a reload deleted.
	Recreated(kind, namespace string)
	// RecordRefused counts a replacement record not acted on, by reason.
	RecordRefused(kind, reason string)
}

// OptedIn reads a per-workload "true"/"false" annotation that overrides a flag's default.
func OptedIn(obj client.Object, key string, dflt bool) bool {
	if b, err := strconv.ParseBool(strings.TrimSpace(obj.GetAnnotations()[key])); err == nil {
		return b
	}
	return dflt
}

// Carried is the context a write begun runs in: ctx without its cancellation, with its
// deadline. A reconcile's context is cancelled at the stop signal; a write cut then may land
// on the API server with its answer lost, and the rollout it starts would be neither counted
// nor reported (the next process finds the workload recorded, and has nothing to do). So a
// write begun is carried through, within the reconcile's deadline (--reconcile-timeout) and
// the process's own grace on stopping.
func Carried(ctx context.Context) (context.Context, context.CancelFunc) {
	out := context.WithoutCancel(ctx)
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(out, deadline)
	}
	return out, func() {}
}
