package generic

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/gate"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
)

// DueOf is dueOf for the external tests: the config's sources are given as read (nil: absent).
func DueOf(cfg *v1alpha1.ReloaderConfig, t reloaderconfig.GenericTarget, obj client.Object, sources []reload.Change, objects []client.Object, changed bool, now time.Time) gate.Due {
	in := content{changes: sources, objects: map[source.ID]client.Object{}}
	for i, ch := range sources {
		if objects[i] != nil {
			in.objects[ch.ID] = objects[i]
		}
	}
	return dueOf(cfg, reloaderconfig.Compile(cfg), t, obj, in, changed, now)
}
