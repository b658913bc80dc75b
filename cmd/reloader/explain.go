package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/options"
)

// pluginName is the binary's name when kubectl runs it as `kubectl reloader`, and
// pluginDisplayName what the user types, so what help and usage lines show.
const (
	pluginName        = "kubectl-reloader"
	pluginDisplayName = "kubectl reloader"
)

// isPlugin reports whether the binary was started as the kubectl plugin.
func isPlugin(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == pluginName
}

// newPluginCommand is the root of `kubectl reloader`: the read-only commands and release, no
// controller.
func newPluginCommand() *cobra.Command {
	cmd := &cobra.Command{
		// cobra takes a command's name from the first word of Use; the annotation is the
		// name usage lines print, so they read "kubectl reloader explain", not "kubectl explain".
		Use:         pluginName,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: pluginDisplayName},
		Short:       "Explain what reloader does about a workload or a source, plan a change, release a quarantine, approve a reload",
		Long: `Explain what reloader does about a workload or a source, and plan a change, read-only.

Shell completion: put kubectl_complete-reloader, from the same release archive, on the PATH
beside kubectl-reloader; kubectl 1.26 and later then completes "kubectl reloader ...".`,
		SilenceUsage:  true,
		SilenceErrors: false,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printVersion(cmd) {
				return nil
			}
			return cmd.Help()
		},
	}
	addVersionFlag(cmd)
	// No `completion` command: a script cobra generates here would complete a command named
	// kubectl-reloader, which nobody types. kubectl (1.26 and later) completes `kubectl
	// reloader ...` through an executable kubectl_complete-reloader on the PATH, shipped in
	// the release archive, which asks this command's hidden __complete.
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.AddCommand(newExplainCommand(pluginDisplayName), newPlanCommand(pluginDisplayName), newReleaseCommand(pluginDisplayName), newApproveCommand(pluginDisplayName))
	return cmd
}

// defaultKeyNamespace is where the chart installs reloader, and so its hash key.
const defaultKeyNamespace = "reloader"

// newExplainCommand is `<root> explain <kind>/<name>`, root being how the user calls the
// binary (reloader, or kubectl reloader), which the examples show. It takes the controller's
// flags and environment too, so that an install with renamed annotations or other flags is
// explained as it runs.
func newExplainCommand(root string) *cobra.Command {
	opts := options.Default()
	var namespace, kubeContext, output, keyNamespace string
	cmd := &cobra.Command{
		Use:   "explain <kind>/<name>",
		Short: "Explain why a workload reloads or not, or which workloads a ConfigMap or Secret change reloads",
		Long: `Explain reads the cluster (read-only) and decides as the controller does, with its code:
for a workload, which sources reload it and why, their hashes against the record, what the
next reconcile does, and its last reloads; for a ConfigMap or Secret, the workloads a change
would reload.

Kinds: deployment, statefulset, daemonset, cronjob, job, rollout, deploymentconfig,
configmap, secret (singular, plural or short). Pass the controller's own flags (annotation
names, --auto-reload-all, --namespace-selector, ...) when the install changed them.

Secret hashes are keyed with reloader's hash key, a Secret in reloader's namespace that only
reloader should read. Without access to it, explain still answers: recorded Secret hashes,
rules, change times and holds, with each Secret's change marked unknown.`,
		Example: fmt.Sprintf(`  # Why does the Deployment web reload, or not?
  %[1]s explain deployment/web -n shop

  # Which workloads would a change of the ConfigMap app-config reload?
  %[1]s explain configmap/app-config -n shop

  # The same, as JSON, for an install with a renamed auto annotation
  %[1]s explain cm/app-config -n shop -o json --auto-annotation=example.com/auto`, root),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := explain.ParseTarget(args[0])
			if err != nil {
				return err
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			e, _, _, err := explainer(cmd.Context(), opts, kubeContext, namespace, keyNamespace)
			if err != nil {
				return err
			}
			var report interface{ WriteText(io.Writer) error }
			if target.Workload != nil {
				report, err = e.Workload(cmd.Context(), target.Workload, target.Name)
			} else {
				report, err = e.Source(cmd.Context(), target.Source, target.Name)
			}
			if err != nil {
				return err
			}
			return write(cmd.OutOrStdout(), report, output)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the object (default: the kubeconfig context's)")
	cmd.Flags().StringVar(&kubeContext, "context", "", "kubeconfig context to use")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&keyNamespace, "reloader-namespace", "", "reloader's namespace, where its Secret hash key is; read only if you may (default: $RELOADER_NAMESPACE, $POD_NAMESPACE, else "+defaultKeyNamespace+")")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return options.ExplainFlagError(err) })
	opts.BindFlags(cmd.Flags())
	return cmd
}

// reloaderNamespace is where reloader keeps its Secret hash key: the flag, else reloader's
// own namespace as the controller takes it (RELOADER_NAMESPACE, POD_NAMESPACE), else the
// chart's. Never a guess among other namespaces: a Secret of that name elsewhere is anyone's,
// and a key that is not reloader's would explain Secret changes wrongly.
func reloaderNamespace(flag string, conf options.Config) string {
	switch {
	case flag != "":
		return flag
	case conf.ReloaderNamespace != "":
		return conf.ReloaderNamespace
	}
	return defaultKeyNamespace
}

func write(out io.Writer, report interface{ WriteText(io.Writer) error }, format string) error {
	if format == "text" {
		return report.WriteText(out)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}
