// Command localcluster starts a local Kubernetes control plane (etcd, kube-apiserver and,
// with --rollouts, kube-controller-manager, kube-scheduler and kwok fake nodes) and keeps it
// running until interrupted. It writes a kubeconfig for kubectl, reloader and load tests.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/reloader-operator/reloader/internal/testenv"
)

func main() {
	var opts testenv.Options
	var out string
	pflag.BoolVar(&opts.Rollouts, "rollouts", true, "also run controller-manager, scheduler and kwok nodes, so pods really roll")
	pflag.IntVar(&opts.Nodes, "nodes", 2, "fake nodes (with --rollouts)")
	pflag.StringVar(&out, "kubeconfig-out", "", "also copy the kubeconfig to this path")
	pflag.Parse()

	ctx := ctrl.SetupSignalHandler()
	c, err := testenv.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
	path := c.Kubeconfig
	if out != "" {
		data, err := os.ReadFile(c.Kubeconfig)
		if err == nil {
			err = os.WriteFile(out, data, 0o600)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "localcluster:", err)
		} else {
			path = out
		}
	}
	fmt.Printf("control plane running; export KUBECONFIG=%s\nlogs in %s; Ctrl-C stops it\n", path, c.Dir)
	<-ctx.Done()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster: stop:", err)
	}
}
