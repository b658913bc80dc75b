// Package reload decides which sources concern a workload and what a reload writes. It is
// pure logic over annotations and pod templates; the controller feeds it objects.
package reload

import "github.com/reloader-operator/reloader/internal/source"

// Keys holds the annotation names reloader reads. Each is renameable by a flag, as upstream
// Reloader allows, so existing manifests keep working.
type Keys struct {
	Auto      string                 // on workloads: reload on any referenced source
	TypedAuto map[source.Kind]string // on workloads: auto, limited to one kind
	Reload    map[source.Kind]string // on workloads: named / regex list of sources
	Exclude   map[source.Kind]string // on workloads: names that never trigger
	Search    string                 // on workloads: reload on referenced sources that Match
	Match     string                 // on sources: opt in to Search
	Ignore    string                 // on sources: never trigger anything

	PausePeriod     string // on Deployments: pause for this long after a reload
	PausedAt        string // written while paused
	RolloutStrategy string // on Argo Rollouts
}

// DefaultKeys returns upstream Reloader's annotation names.
func DefaultKeys() Keys {
	return Keys{
		Auto: "reloader.stakater.com/auto",
		TypedAuto: map[source.Kind]string{
			source.ConfigMap:           "configmap.reloader.stakater.com/auto",
			source.Secret:              "secret.reloader.stakater.com/auto",
			source.SecretProviderClass: "secretproviderclass.reloader.stakater.com/auto",
		},
		Reload: map[source.Kind]string{
			source.ConfigMap:           "configmap.reloader.stakater.com/reload",
			source.Secret:              "secret.reloader.stakater.com/reload",
			source.SecretProviderClass: "secretproviderclass.reloader.stakater.com/reload",
		},
		Exclude: map[source.Kind]string{
			source.ConfigMap:           "configmaps.exclude.reloader.stakater.com/reload",
			source.Secret:              "secrets.exclude.reloader.stakater.com/reload",
			source.SecretProviderClass: "secretproviderclasses.exclude.reloader.stakater.com/reload",
		},
		Search:          "reloader.stakater.com/search",
		Match:           "reloader.stakater.com/match",
		Ignore:          "reloader.stakater.com/ignore",
		PausePeriod:     "deployment.reloader.stakater.com/pause-period",
		PausedAt:        "deployment.reloader.stakater.com/paused-at",
		RolloutStrategy: "reloader.stakater.com/rollout-strategy",
	}
}

// Annotations written by reloader itself.
const (
	// LastReloadedFrom is the pod-template annotation of the annotations strategy.
	LastReloadedFrom = "reloader.stakater.com/last-reloaded-from"
	// RecordAnnotation holds, on the workload's own metadata, the content hash of every source
	// last applied. It lets reloader catch up on changes made while it was down, and lets a
	// restart touch nothing that did not change. Metadata annotations never restart pods.
	RecordAnnotation = "reloader.dev/source-hashes"
)

// Annotations that opt one workload in or out of a behaviour whose default a flag sets.
const (
	// RunOnReloadAnnotation on a CronJob: "true" also starts a Job when it reloads.
	RunOnReloadAnnotation = "reloader.dev/run-on-reload"
	// RecreateFinishedAnnotation on a Job: "true" also replaces it once it has finished.
	RecreateFinishedAnnotation = "reloader.dev/recreate-finished"
)

// Annotations that pace a workload's reloads (docs/operations.md: Rollout pacing).
const (
	// MinReloadIntervalAnnotation: a Go duration; a reload comes at least this long after the
	// last one (--min-reload-interval sets the default).
	MinReloadIntervalAnnotation = "reloader.dev/min-reload-interval"
	// ReloadWindowAnnotation: maintenance windows (ParseReloadWindows) outside which
	// changes are held.
	ReloadWindowAnnotation = "reloader.dev/reload-window"
	// LastReloadAnnotation is written by a reload, in its own patch, when a minimum interval
	// applies: the time (RFC 3339) the next one is counted from.
	LastReloadAnnotation = "reloader.dev/last-reload"
)
