package generic

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
)

// A due reload of a generic target goes through the workloads' pipeline: the gates of the one
// gate.Chain (internal/app writes their order), then the rate step (gate/rate), then this
// package's writer (the template patch), then the reporter (internal/report). What the gates
// see of it is a gate.Due, built here.

// dueOf is the gates' view of one reconcile of generic target t of config cfg (compiled c),
// read as obj, whose config's sources read in; changed says the sources' hash differs from the
// config's record on obj (a reload is due), else nothing is due and the gates only forget or
// remove what they kept. Every source of the config counts as due then: the record is one
// hash of them all.
func dueOf(cfg *v1alpha1.ReloaderConfig, c *reloaderconfig.Compiled, t reloaderconfig.GenericTarget, obj client.Object, in content, changed bool, now time.Time) gate.Due {
	// Read live, never watched (Live): a gate that waits on the target (an approval) polls.
	d := gate.Due{Key: targetKey(cfg, t), Kind: kindName(t), Target: obj, Overrides: c.Overrides, Live: true, Now: now}
	d.Sources = make(map[source.ID]gate.Source, len(in.changes))
	for _, ch := range in.changes {
		o := in.objects[ch.ID]
		s := gate.Source{Hash: ch.Hash}
		if o != nil {
			s.Object, s.Annotations = o, o.GetAnnotations()
		}
		d.Sources[ch.ID] = s
	}
	if changed {
		d.Changes = in.changes
		for _, ch := range in.changes {
			if o := in.objects[ch.ID]; o != nil {
				d.Related = o
				break
			}
		}
	}
	return d
}

// kindName is how the pipeline names a generic target's kind: its group-qualified kind
// ("Grafana.grafana.integreatly.org"), as kubectl takes it, so the approval hint reads
// `kubectl annotate grafana.grafana.integreatly.org/name`, and never one of the workload
// kinds' names (a generic target of kind apps/Deployment is "Deployment.apps"): the gates that
// read workloads (waves) leave it out.
func kindName(t reloaderconfig.GenericTarget) string { return t.GVK.GroupKind().String() }

// configKey starts the keys of a config's targets.
func configKey(ns, name string) string { return "generic/" + ns + "/" + name + "/" }

// targetKey names a target of a config in the pipeline's tables (the gates', the pacer's, the
// reporter's): per config, as each config keeps its own record on a target.
func targetKey(cfg *v1alpha1.ReloaderConfig, t reloaderconfig.GenericTarget) string {
	return configKey(cfg.Namespace, cfg.Name) + t.GVK.GroupKind().String() + "/" + t.Name
}
