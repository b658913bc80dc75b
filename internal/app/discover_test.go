package app_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// lines is a logger that keeps what it logs.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.all = append(l.all, args)
	}, funcr.Options{})
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// unanswered registers, on the real API server, an aggregated API whose backend Service does
// not exist: it is listed, and its discovery fails, as a broken aggregated API's does.
func unanswered(t *testing.T, gv schema.GroupVersion) {
	t.Helper()
	k8s, err := client.New(restConfig, client.Options{})
	testutil.Must(t, err)
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": gv.Version + "." + gv.Group},
		"spec": map[string]any{"group": gv.Group, "version": gv.Version, "insecureSkipTLSVerify": true,
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service": map[string]any{"namespace": "default", "name": "nobody-answers", "port": int64(443)}},
	}}
	testutil.Must(t, k8s.Create(context.Background(), svc))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), svc) })
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	testutil.Must(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, err := dc.ServerGroupsAndResources()
		groups, _ := discovery.GroupDiscoveryFailedErrorGroups(err)
		if _, ok := groups[gv]; ok {
			t.Logf("discovery of %s fails as wanted: %v", gv, groups[gv])
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("discovery of %s never failed: %v", gv, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var quick = wait.Backoff{Duration: 20 * time.Millisecond, Factor: 2, Steps: 3}

// An optional API that is listed but does not answer is asked again, then: a flag that asks
// for it stops start-up with an error naming it; one found by discovery alone is not served,
// with a warning. An API not registered at all is simply absent, at once.
func TestDiscoveryFailuresAreRetriedNotTakenAsAbsent(t *testing.T) {
	gv := schema.GroupVersion{Group: "unanswered.reloader.test", Version: "v1"}
	unanswered(t, gv)
	ctx := context.Background()

	var asked lines
	_, err := app.Discover(ctx, restConfig, gv, true, quick, asked.logger(), &extapi.Rollout{})
	if err == nil {
		t.Fatal("an API asked for that does not answer was taken as absent")
	}
	for _, want := range []string{"discovery of unanswered.reloader.test/v1 failed 3 times", "kubectl get apiservices v1.unanswered.reloader.test"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := strings.Count(asked.text(), "API discovery failed; retrying"); n != 3 {
		t.Errorf("%d attempts logged, want 3:\n%s", n, asked.text())
	}

	var auto lines
	ok, err := app.Discover(ctx, restConfig, gv, false, quick, auto.logger(), &extapi.Rollout{})
	if err != nil || ok {
		t.Fatalf("found by discovery alone: served %v, %v; want not served, no error", ok, err)
	}
	if !strings.Contains(auto.text(), "WARNING: discovery of unanswered.reloader.test/v1 failed 3 times") {
		t.Errorf("no warning:\n%s", auto.text())
	}

	// Not registered at all: absent, without retries, even when asked for.
	var absent lines
	start := time.Now()
	ok, err = app.Discover(ctx, restConfig, extapi.OpenShiftGroupVersion, true, wait.Backoff{Duration: time.Minute, Steps: 3}, absent.logger(), &extapi.DeploymentConfig{})
	if err != nil || ok || time.Since(start) > 20*time.Second {
		t.Errorf("an API not registered: served %v, %v after %v; want absent at once", ok, err, time.Since(start))
	}
	if strings.Contains(absent.text(), "retrying") {
		t.Errorf("retried an API that is not registered:\n%s", absent.text())
	}
}
