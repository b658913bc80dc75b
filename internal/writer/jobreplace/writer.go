// Package jobreplace writes the reloads of kinds that can't be patched into rolling: a Job is
// replaced (deleted, then created again from the new state, through a signed record that lets
// the next leader finish a replacement left half done), and a CronJob that runs on reload
// starts a Job beside its patch. Both ask the API server first whether it would admit what
// they create (admission.go).
package jobreplace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/workload"
	"github.com/reloader-operator/reloader/internal/writer"
)

// Writer replaces the objects of a re-created kind (workload.Recreated) on reload; a write
// with no change (a first record) goes to Patch.
type Writer struct {
	Client client.Client
	// APIReader reads past the cache; nil reads through Client. A pending replacement asks it
	// whether the old object is really still there (createReplacement).
	APIReader client.Reader
	Kind      workload.Kind
	// Key is the install key that signs the records (records.go); nil, or a key that is not
	// valid, trusts only the records this process wrote.
	Key    KeySource
	Report writer.Reporter
	// Patch writes what is not a replacement.
	Patch writer.Writer

	jobs pendingJobs
}

var (
	_ writer.Writer  = (*Writer)(nil)
	_ writer.Resumer = (*Writer)(nil)
	_ writer.Watcher = (*Writer)(nil)
)

// Write implements writer.Writer: a reload replaces old by the kind's replacement of updated.
func (w *Writer) Write(ctx context.Context, old, updated client.Object, in writer.Input) error {
	rc, ok := w.Kind.(workload.Recreated)
	if !ok || len(in.Changes) == 0 {
		return w.Patch.Write(ctx, old, updated, in)
	}
	w.Report.Action(w.Kind.Name(), "replace-job")
	return w.Replace(ctx, old, rc.Replacement(updated))
}

// Resume implements writer.Resumer: a replacement written down and not seen done is finished
// (createReplacement) before anything else is decided about its object.
func (w *Writer) Resume(ctx context.Context, nn types.NamespacedName, current client.Object, exists bool) (reconcile.Result, bool, error) {
	p, ok := w.jobs.get(nn)
	if !ok {
		return reconcile.Result{}, false, nil
	}
	res, err := w.createReplacement(ctx, nn, p, current, exists)
	return res, true, err
}

// Pending reports whether a replacement of nn is held, and whether it is marked to be dropped
// without creating anything.
func (w *Writer) Pending(nn types.NamespacedName) (held, drop bool) {
	p, held := w.jobs.get(nn)
	return held, p.drop
}

// RunOnReload patches a CronJob on reload and, when it runs on reload (the run-on-reload
// annotation, or Input.RunCronJobs) and is not suspended, first starts a Job from it, under a
// name derived from the new state, so that a retry never starts a second one.
type RunOnReload struct {
	Client client.Client
	Kind   workload.Kind
	Report writer.Reporter
	// Patch writes the CronJob itself.
	Patch writer.Writer
}

// Write implements writer.Writer.
func (w *RunOnReload) Write(ctx context.Context, old, updated client.Object, in writer.Input) error {
	if sc, ok := w.Kind.(workload.Scheduled); ok && len(in.Changes) > 0 &&
		writer.OptedIn(updated, reload.RunOnReloadAnnotation, in.RunCronJobs) && !sc.Suspended(updated) {
		job := sc.RunNow(updated, runName(old, in.Record))
		// Nothing is deleted first, so no dry run; a refused blockOwnerDeletion is still let go.
		if _, err := createAdmitted(ctx, w.Client, job, false); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("start Job from CronJob: %w", err)
		}
		w.Report.Action(w.Kind.Name(), "run-cronjob")
		log.FromContext(ctx).Info("started Job from reloaded CronJob", "job", job.GetName())
	}
	return w.Patch.Write(ctx, old, updated, in)
}

// runName names the Job a CronJob reload starts: the same for every retry of one reload.
func runName(cronJob client.Object, next reload.Record) string {
	sum := sha256.Sum256([]byte(string(cronJob.GetUID()) + "/" + strconv.FormatInt(cronJob.GetGeneration(), 10) + "/" + next.Encode()))
	name := cronJob.GetName()
	if len(name) > 42 {
		name = name[:42]
	}
	return strings.TrimRight(name, "-.") + "-reload-" + hex.EncodeToString(sum[:4])
}
