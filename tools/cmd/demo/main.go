// Command demo starts a local cluster, runs reloader on it, changes a ConfigMap and shows the
// Deployment that uses it roll to new pods, what `reloader explain` says about it, and the
// flap breaker quarantining the ConfigMap when two writers fight over it.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/reloader-operator/reloader/tools/internal/demo"
)

func main() {
	opts := demo.Options{Out: os.Stdout}
	pflag.StringVar(&opts.ReloaderBinary, "reloader", "bin/reloader", "reloader binary to run")
	pflag.StringSliceVar(&opts.ReloaderArgs, "reloader-args", nil, "extra reloader flags")
	pflag.BoolVar(&opts.Keep, "keep", false, "keep the cluster running after the demo, for kubectl")
	pflag.BoolVar(&opts.Verbose, "verbose", false, "show every line reloader logs, not only its decisions, warnings and errors")
	pflag.Parse()
	if _, err := demo.Run(ctrl.SetupSignalHandler(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}
