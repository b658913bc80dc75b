package installtest

import (
	"debug/buildinfo"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/reloader-operator/reloader/internal/devtools/localcluster"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// helmConfig is what the helm CLI builds for `-n namespace` against the test cluster: the
// admin's kubeconfig, and releases stored as Secrets in that namespace, so that installs,
// upgrades and rollbacks leave the release history a real cluster has. Discovery is cached
// in a directory of the test's own, not in $HOME. Helm's log is printed if the test fails.
func helmConfig(t *testing.T, namespace string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, cacheDir := cluster.Kubeconfig, t.TempDir()
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kubeconfig, &namespace, &cacheDir

	var (
		mu  sync.Mutex
		log strings.Builder
	)
	logf := func(format string, v ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&log, format+"\n", v...)
	}
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, namespace, "secret", logf); err != nil {
		t.Fatalf("helm configuration for namespace %s: %v", namespace, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("--- helm log (namespace %s) ---\n%s", namespace, log.String())
		}
	})
	return cfg
}

// refreshCapabilities does what Helm does before each install or upgrade (discovery of the
// API versions served, and of the server's version) but for one thing: the kube-apiserver
// built from Go modules (hack/kube-binaries.sh) reports v0.0.0-master, which a chart's
// kubeVersion constraint refuses; its version is then that of the k8s.io/kubernetes module it
// was built from, as its build information says. A server reporting a version keeps it.
func refreshCapabilities(t *testing.T, cfg *action.Configuration) {
	t.Helper()
	dc, err := cfg.RESTClientGetter.ToDiscoveryClient()
	testutil.Must(t, err)
	dc.Invalidate()
	server, err := dc.ServerVersion()
	testutil.Must(t, err)
	apiVersions, err := action.GetVersionSet(dc)
	testutil.Must(t, err)
	gitVersion := server.GitVersion
	if strings.HasPrefix(gitVersion, "v0.0.0") {
		if gitVersion, err = builtKubernetesVersion(); err != nil {
			t.Fatal(err)
		}
	}
	v, err := version.ParseSemantic(gitVersion)
	if err != nil {
		t.Fatalf("Kubernetes version %q: %v", gitVersion, err)
	}
	cfg.Capabilities = &chartutil.Capabilities{
		APIVersions: apiVersions,
		KubeVersion: chartutil.KubeVersion{Version: gitVersion, Major: fmt.Sprint(v.Major()), Minor: fmt.Sprint(v.Minor())},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}
}

// builtKubernetesVersion is the version of k8s.io/kubernetes the test's kube-apiserver was
// built from.
func builtKubernetesVersion() (string, error) {
	dir, err := localcluster.BinDir()
	if err != nil {
		return "", err
	}
	info, err := buildinfo.ReadFile(filepath.Join(dir, "kube-apiserver"))
	if err != nil {
		return "", err
	}
	if info.Main.Path != "k8s.io/kubernetes" || !strings.HasPrefix(info.Main.Version, "v1.") {
		return "", fmt.Errorf("kube-apiserver in %s: built from %s %s, not a release of k8s.io/kubernetes", dir, info.Main.Path, info.Main.Version)
	}
	return info.Main.Version, nil
}
