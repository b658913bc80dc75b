package configstatus

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
)

func TestReloadLog(t *testing.T) {
	cm := source.ID{Kind: source.ConfigMap, Name: "app-config"}
	sec := source.ID{Kind: source.Secret, Name: "creds"}
	web := types.NamespacedName{Namespace: "shop", Name: "web"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	all := func(source.ID) bool { return true }
	only := func(id source.ID) func(source.ID) bool { return func(x source.ID) bool { return x == id } }

	l := NewReloadLog(2)
	l.Add("Deployment", web, t0, []reload.Change{{ID: cm, Hash: "h1"}})
	l.Add("Deployment", web, t0.Add(time.Minute), []reload.Change{{ID: sec, Hash: "s1"}})
	if got, ok := l.Latest("Deployment", web, all); !ok || got.Source != sec {
		t.Errorf("latest of all: %+v %v, want the Secret's", got, ok)
	}
	// A config that chooses only the ConfigMap still sees its reload, not the Secret's.
	if got, ok := l.Latest("Deployment", web, only(cm)); !ok || got.Hash != "h1" || !got.At.Equal(t0) {
		t.Errorf("latest by the ConfigMap: %+v %v", got, ok)
	}
	if _, ok := l.Latest("StatefulSet", web, all); ok {
		t.Error("another kind of the same name shares the log")
	}

	// The rollout outcome belongs to the latest reload; one of an older reload is dropped.
	if l.SetRollout("Deployment", web, t0, "Stalled", "old") {
		t.Error("outcome of an older reload taken")
	}
	if !l.SetRollout("Deployment", web, t0.Add(time.Minute), "Stalled", "ProgressDeadlineExceeded") {
		t.Error("outcome of the latest reload dropped")
	}
	if got, _ := l.Latest("Deployment", web, only(sec)); got.Rollout != "Stalled" || got.RolloutReason != "ProgressDeadlineExceeded" {
		t.Errorf("outcome not kept: %+v", got)
	}
	if got, _ := l.Latest("Deployment", web, only(cm)); got.Rollout != "" {
		t.Errorf("outcome given to an older reload: %+v", got)
	}

	// Bounded: a third workload drops the one reloaded longest ago.
	l.Add("Deployment", types.NamespacedName{Namespace: "shop", Name: "api"}, t0.Add(2*time.Minute), []reload.Change{{ID: cm}})
	l.Add("Deployment", types.NamespacedName{Namespace: "shop", Name: "db"}, t0.Add(3*time.Minute), []reload.Change{{ID: cm}})
	if _, ok := l.Latest("Deployment", web, all); ok {
		t.Error("the oldest workload was kept past the bound")
	}
	if len(l.entries) != 2 {
		t.Errorf("%d workloads held, bound 2", len(l.entries))
	}

	// Bounded per workload too.
	many := NewReloadLog(0)
	for i := range maxSourcesLogged + 10 {
		many.Add("Deployment", web, t0.Add(time.Duration(i)*time.Second), []reload.Change{{ID: source.ID{Kind: source.ConfigMap, Name: fmt.Sprint(i)}}})
	}
	if n := len(many.entries[workloadKey{"Deployment", web}].bySource); n != maxSourcesLogged {
		t.Errorf("%d sources held for one workload, bound %d", n, maxSourcesLogged)
	}
}
