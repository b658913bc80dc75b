// Command rssfloor is the smallest controller-runtime program that does what reloader's cache
// does at its core: a manager with one ConfigMap informer, synced. It prints its own memory
// once settled: the floor under any controller built on these libraries. `make
// bench-rss-floor` runs it on an empty local control plane (scalebench --rss-floor), and
// docs/benchmarks.md sets reloader's figures beside it. It links nothing else, on purpose.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	if err := measure(); err != nil {
		fmt.Fprintln(os.Stderr, "rssfloor:", err)
		os.Exit(1)
	}
}

// measure syncs a manager's ConfigMap informer, lets it settle, and prints its own memory.
func measure() error {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := config.GetConfig()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: server.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
		return err
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("cache not synced")
	}
	time.Sleep(3 * time.Second)
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	fmt.Println("a bare controller-runtime manager with one synced ConfigMap informer:")
	for _, line := range strings.Split(string(status), "\n") {
		for _, key := range []string{"VmRSS:", "RssAnon:", "RssFile:"} {
			if strings.HasPrefix(line, key) {
				fmt.Println(" ", strings.Join(strings.Fields(line), " "))
			}
		}
	}
	return nil
}
