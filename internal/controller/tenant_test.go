package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// A tenant with 20 ReloaderConfigs of 64 targets choosing every Deployment, 200 Deployments
// and a ConfigMap carrying the ignore annotation patches that ConfigMap again and again.
// Mapping one of its events once took seconds on the informer's goroutine, which every
// namespace's ConfigMap events share: another namespace's reload waited behind it, then
// never came. The victim's Deployment must reload within 2 s of each change, the tenant's
// never, and the configs past the namespace's limits say they are left out.
func TestATenantsIgnoredSourceDoesNotHoldBackAnotherNamespace(t *testing.T) {
	const configs, targets, deployments = 20, 64, 200
	tenant, victim := newNamespace(t), newNamespace(t)
	noisy := configMap(tenant, "noisy", map[string]string{"k": "0"})
	noisy.Annotations = map[string]string{reload.DefaultKeys().Ignore: "true"}
	create(t, noisy, configMap(victim, "cfg", map[string]string{"k": "v1"}))
	all := make([]v1alpha1.Target, targets)
	for i := range all {
		all[i] = v1alpha1.Target{Kind: "Deployment", All: true}
	}
	for i := range configs {
		create(t, reloaderConfig(tenant, fmt.Sprintf("cfg-%02d", i), all, v1alpha1.Source{Kind: "ConfigMap", All: true}))
	}
	for i := range deployments {
		create(t, deployment(tenant, fmt.Sprintf("web-%03d", i), nil, podSpec("noisy")))
	}
	web := deployment(victim, "web", map[string]string{auto: "true"}, podSpec("cfg"))
	create(t, web)
	rollsTenant, rollsVictim := rollTimes(t, tenant), rollTimes(t, victim)
	startReloader(t, tenant, func(o *options.Options) { o.Namespaces = []string{tenant, victim} })
	recorded(t, web)
	// Past 512 targets in all, the configs last by name are left out, and say so.
	testutil.Eventually(t, "cfg-19 reports LimitExceeded", func() error {
		cfg := &v1alpha1.ReloaderConfig{}
		testutil.Must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: tenant, Name: "cfg-19"}, cfg))
		if c := apimeta.FindStatusCondition(cfg.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonLimitExceeded {
			return fmt.Errorf("Ready: %+v", c)
		}
		return nil
	})
	eventuallyEvent(t, tenant, "cfg-19", v1alpha1.ReasonLimitExceeded)
	first := &v1alpha1.ReloaderConfig{}
	testutil.Must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: tenant, Name: "cfg-00"}, first))
	if c := apimeta.FindStatusCondition(first.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason == v1alpha1.ReasonLimitExceeded {
		t.Errorf("cfg-00, first by name: Ready %+v, want a status and not left out", c)
	}

	idleControlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	patches := 0
	wg.Go(func() {
		for ctx.Err() == nil {
			patches++
			cm := configMap(tenant, "noisy", nil)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(cm), cm); err == nil {
				cm.Data["k"] = fmt.Sprint(patches)
				_ = k8s.Update(ctx, cm)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	stopPatching := sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stopPatching)

	time.Sleep(time.Second) // the tenant's patches are flowing
	for round := 1; round <= 3; round++ {
		changed := time.Now()
		update(t, configMap(victim, "cfg", nil), func(c *corev1.ConfigMap) { c.Data["k"] = fmt.Sprint("v", round+1) })
		testutil.Eventually(t, "the victim's Deployment rolled", func() error {
			if n := len(rollsVictim()["web"]); n < round {
				return fmt.Errorf("rolled %d times, want %d", n, round)
			}
			return nil
		})
		took := rollsVictim()["web"][round-1].Sub(changed)
		t.Logf("round %d: the victim rolled %v after its change", round, took)
		if took > 2*time.Second {
			t.Errorf("round %d: the victim rolled %v after its change, want within 2s", round, took)
		}
	}
	stopPatching()
	t.Logf("the tenant patched its ignored ConfigMap %d times", patches)

	if n := len(rollsTenant()); n != 0 {
		t.Errorf("%d of the tenant's Deployments rolled on changes of an ignored ConfigMap", n)
	}
}
