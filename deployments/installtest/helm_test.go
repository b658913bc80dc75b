package installtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// helmConfig is what the helm CLI builds for `-n namespace` against the test cluster: the
// admin's kubeconfig, and releases stored as Secrets in that namespace, so that installs,
// upgrades and rollbacks leave the release history a real cluster has. Discovery is cached
// in a directory of the test's own, not in $HOME. Helm's log is printed if the test fails.
// The cluster's API versions and Kubernetes version are Helm's own discovery, as the CLI's:
// the local kube-apiserver reports its real version (hack/kube-binaries.sh stamps it), so a
// chart's kubeVersion constraint is checked against it.
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
