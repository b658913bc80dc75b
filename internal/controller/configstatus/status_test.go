package configstatus

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/controller/rollout"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// A stalled rollout after a reload by a chosen source shows on the target and degrades the
// config; the rules still resolve. A reload reloader no longer holds (a restart) is kept from
// the status; one by a source the config does not choose is not shown.
func TestConfigStatusFromReloads(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cm := source.ID{Kind: source.ConfigMap, Name: "app-config"}
	other := source.ID{Kind: source.ConfigMap, Name: "other"}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	api := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api"}}
	r := &Reconciler{Keys: reload.DefaultKeys(), Reloads: NewReloadLog(0), Now: func() time.Time { return now }}
	r.Reloads.Add("Deployment", types.NamespacedName{Namespace: "shop", Name: "web"}, now.Add(-time.Minute), []reload.Change{{ID: cm, Hash: "h2"}})
	r.RolloutEnded(rollout.Outcome{Kind: "Deployment", Namespace: "shop", Name: "web", ReloadedAt: now.Add(-time.Minute - time.Millisecond),
		Outcome: rollout.RolloutStalled, Reason: "ProgressDeadlineExceeded"})
	r.Reloads.Add("Deployment", types.NamespacedName{Namespace: "shop", Name: "api"}, now, []reload.Change{{ID: other, Hash: "o"}})

	stored := &v1alpha1.Reload{Time: metav1.NewTime(now.Add(-time.Hour)), Source: "configmap/app-config", Hash: "h1"}
	cfg := &v1alpha1.ReloaderConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shop", Generation: 2},
		Status: v1alpha1.ReloaderConfigStatus{Targets: []v1alpha1.TargetStatus{{Kind: "Deployment", Name: "api", LastReload: stored}}}}
	res := &resolution{
		targets: map[workloadKey]resolvedTarget{
			{"Deployment", types.NamespacedName{Namespace: "shop", Name: "web"}}: {kind: workload.Deployment(), obj: web},
			{"Deployment", types.NamespacedName{Namespace: "shop", Name: "api"}}: {kind: workload.Deployment(), obj: api},
		},
		sources: map[source.ID]resolvedSource{cm: {kind: source.ConfigMap, hash: "h2"}},
		chosen:  map[source.ID]bool{cm: true}, seen: map[string]bool{},
	}
	st := r.status(cfg, &reloaderconfig.Compiled{Name: "shop"}, res, nil)

	if st.ObservedGeneration != 2 || st.TargetCount != 2 || st.SourceCount != 1 || len(st.Targets) != 2 {
		t.Fatalf("status %+v", st)
	}
	apiStatus, webStatus := st.Targets[0], st.Targets[1] // sorted by name
	if l := webStatus.LastReload; l == nil || l.Source != "configmap/app-config" || l.Hash != "h2" || l.Rollout != "Stalled" || l.RolloutReason != "ProgressDeadlineExceeded" {
		t.Errorf("web's last reload %+v", l)
	}
	if l := apiStatus.LastReload; l == nil || l.Hash != "h1" {
		t.Errorf("api's last reload %+v, want the stored one (the held one is by a source not chosen)", l)
	}
	if st.LastReloadTime == nil || !st.LastReloadTime.Time.Equal(now.Add(-time.Minute)) {
		t.Errorf("lastReloadTime %v", st.LastReloadTime)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded); c == nil || c.Reason != v1alpha1.ReasonRolloutStalled {
		t.Errorf("Degraded %+v", c)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}
}
