package app

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/reloader-operator/reloader/internal/coreevents"
)

// eventRecorder returns the recorder of reloader's Events: core/v1 Events (the "" group), as
// upstream writes them, reported by reloader-configmaps or reloader-secrets after the source
// that caused them (see internal/coreevents). It records from now until ctx ends: reloader's
// reconcilers only run within that.
func eventRecorder(ctx context.Context, mgr manager.Manager) (recorder.EventRecorder, error) {
	cs, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, err
	}
	b := coreevents.NewBroadcaster(cs.CoreV1())
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	return coreevents.NewRecorder(b, mgr.GetScheme()), nil
}
