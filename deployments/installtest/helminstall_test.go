package installtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/deployments/render"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestHelmInstallOnLocalCluster is the README's `helm install reloader
// deployments/chart/reloader -n <namespace> --create-namespace`, through Helm's SDK against the
// local control plane's API server, with Helm's own discovery (no Capabilities or KubeVersion
// given): the server reports the version hack/kube-binaries.sh stamps, and the chart's
// kubeVersion constraint accepts it. A constraint the server's version does not meet is
// refused, naming that version, so the check is real.
func TestHelmInstallOnLocalCluster(t *testing.T) {
	needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, name = "helm-install", "reloader"
	cfg := helmConfig(t, ns)

	dc, err := cfg.RESTClientGetter.ToDiscoveryClient()
	testutil.Must(t, err)
	server, err := dc.ServerVersion()
	testutil.Must(t, err)
	if server.GitVersion != render.KubeVersion {
		t.Fatalf("the API server's discovery version is %q, want %s (hack/kube-binaries.sh stamps it)", server.GitVersion, render.KubeVersion)
	}
	ours := loadChart(t, chartDir)
	if ours.Metadata.KubeVersion == "" {
		t.Fatal("the chart has no kubeVersion constraint: nothing for this test to check")
	}
	if cfg.Capabilities != nil {
		t.Fatal("the Helm configuration has capabilities set: the install must discover them")
	}

	// Where the CRD is not yet in the cluster, as on a first install.
	removeReloaderConfigCRD(t, ctx)
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.CreateNamespace = name, ns, true
	rel, err := inst.Run(ours, nil)
	if err != nil {
		t.Fatalf("helm install %s %s -n %s --create-namespace: %v", name, chartDir, ns, err)
	}
	t.Cleanup(func() {
		if _, err := action.NewUninstall(cfg).Run(name); err != nil {
			t.Logf("helm uninstall %s: %v", name, err)
		}
	})
	if rel.Info.Status != release.StatusDeployed {
		t.Fatalf("helm install: release status %s, want %s", rel.Info.Status, release.StatusDeployed)
	}
	if got := cfg.Capabilities.KubeVersion.Version; got != render.KubeVersion {
		t.Errorf("Helm discovered Kubernetes %s, want %s", got, render.KubeVersion)
	}
	t.Logf("helm install %s: chart kubeVersion %q, cluster %s: %s", name, ours.Metadata.KubeVersion, server.GitVersion, rel.Info.Status)
	var d appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-reloader"}, &d); err != nil {
		t.Errorf("the release's Deployment: %v", err)
	}
	waitReloaderConfigAPI(t, ctx)

	// The same chart asking for a later Kubernetes is refused by the same discovery.
	later := loadChart(t, chartDir)
	later.Metadata.KubeVersion = ">=1.99.0-0"
	dry := action.NewInstall(cfg)
	dry.ReleaseName, dry.Namespace, dry.DryRun = "later", ns, true
	_, err = dry.Run(later, nil)
	if err == nil || !strings.Contains(err.Error(), render.KubeVersion) {
		t.Errorf("install of a chart requiring >=1.99.0-0: %v, want a refusal naming %s", err, render.KubeVersion)
	}
}
