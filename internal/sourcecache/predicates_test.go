package sourcecache

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/reloader-operator/reloader/internal/reload"
)

// TestSourceOfTheFirstListMapsNoWorkload: a source the informer's first list brings is left to
// the workloads' own first list; one created later is looked up.
func TestSourceOfTheFirstListMapsNoWorkload(t *testing.T) {
	p := LaterSources()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	if p.Create(event.CreateEvent{Object: cm, IsInInitialList: true}) {
		t.Error("a source of the first list passes")
	}
	if !p.Create(event.CreateEvent{Object: cm}) {
		t.Error("a source created after the first list is stopped")
	}
	// The webhook notifier's first sight of a source is its first-list event.
	if !SourceChanged(reload.Keys{}, false).Create(event.CreateEvent{Object: cm, IsInInitialList: true}) {
		t.Error("sourceChanged stops a source of the first list")
	}
}
