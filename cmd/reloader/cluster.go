package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/options"
)

// connect loads the controller's flags a read-only command was given and finds its cluster
// and namespace (cluster). The decision code logs what it skips (an unreadable record, a
// failed lookup): to stderr, apart from the report.
func connect(opts options.Options, kubeContext, namespace, keyNamespace string) (options.Config, *rest.Config, string, error) {
	conf, err := options.Load(opts, os.Getenv)
	if err != nil {
		return options.Config{}, nil, "", err
	}
	ctrl.SetLogger(newLogger(conf))
	cfg, namespace, err := cluster(conf, kubeContext, namespace, keyNamespace)
	return conf, cfg, namespace, err
}

// explainer connects (connect) and makes the explainer of the commands that read what reloader
// would decide (explain, approve); it returns the cluster's config and namespace too.
func explainer(ctx context.Context, opts options.Options, kubeContext, namespace, keyNamespace string) (*explain.Explainer, *rest.Config, string, error) {
	conf, cfg, namespace, err := connect(opts, kubeContext, namespace, keyNamespace)
	if err != nil {
		return nil, nil, "", err
	}
	e, err := explain.New(ctx, cfg, conf, namespace, reloaderNamespace(keyNamespace, conf))
	return e, cfg, namespace, err
}

// cluster finds the cluster of the read-only commands as kubectl does (--kubeconfig,
// KUBECONFIG, --context) and the namespace: the flag's, else the context's. The namespaces
// named are checked here, before any request.
func cluster(conf options.Config, kubeContext, namespace, keyNamespace string) (*rest.Config, string, error) {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = conf.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("find a cluster (--kubeconfig, KUBECONFIG, --context): %w", err)
	}
	if cfg.QPS == 0 && cfg.Burst == 0 {
		// client-go's default of 5 requests a second would make a plan of hundreds of
		// workloads take minutes; kubectl's own defaults, for the same kind of reads.
		cfg.QPS, cfg.Burst = 50, 300
	}
	if namespace == "" {
		if namespace, _, err = cc.Namespace(); err != nil {
			return nil, "", err
		}
	}
	for _, ns := range []string{namespace, keyNamespace} {
		if problems := validation.IsDNS1123Label(ns); ns != "" && len(problems) > 0 {
			return nil, "", fmt.Errorf("namespace %q: %s", ns, strings.Join(problems, "; "))
		}
	}
	return cfg, namespace, nil
}
