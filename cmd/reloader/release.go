package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/source"
)

// releaseFieldManager is the field manager of the release annotation this command writes.
const releaseFieldManager = "kubectl-reloader"

// newReleaseCommand is `<root> release <configmap|secret>/<name>`: it asks reloader to end the
// flap breaker's quarantine of a source by writing the time of now into the source's release
// annotation. Only a quarantine that began at or before that time ends, so the annotation,
// left on the source, never releases a later flap.
func newReleaseCommand(root string) *cobra.Command {
	opts := options.Default()
	var namespace, kubeContext string
	cmd := &cobra.Command{
		Use:   "release <configmap|secret>/<name>",
		Short: "End the flap breaker's quarantine of a ConfigMap or Secret: its workloads reload once, on its latest content",
		Long: `Release writes the annotation ` + flap.ReleaseAnnotation + `: <now> on the source (a
merge patch, field manager ` + releaseFieldManager + `; it needs patch on the source). reloader ends the source's
quarantine if it began at or before that time, and its workloads reload once, on its latest
content. A later flap of the same source is quarantined again: the time written is older than it.`,
		Example: fmt.Sprintf(`  # The Secret creds flapped; its content is right now: reload on it
  %[1]s release secret/creds -n shop`, root),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := explain.ParseTarget(args[0])
			if err != nil {
				return err
			}
			var obj client.Object
			switch target.Source {
			case source.ConfigMap:
				obj = &corev1.ConfigMap{}
			case source.Secret:
				obj = &corev1.Secret{}
			default:
				return fmt.Errorf("%q: release takes a configmap or a secret", args[0])
			}
			conf, err := options.Load(opts, func(string) string { return "" })
			if err != nil {
				return err
			}
			cfg, namespace, err := cluster(conf, kubeContext, namespace, "")
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{})
			if err != nil {
				return err
			}
			at := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{flap.ReleaseAnnotation: at}}})
			obj.SetNamespace(namespace)
			obj.SetName(target.Name)
			if err := c.Patch(cmd.Context(), obj, client.RawPatch(types.MergePatchType, patch), &client.PatchOptions{FieldManager: releaseFieldManager}); err != nil {
				return fmt.Errorf("release %s/%s in %s: %w", target.Source, target.Name, namespace, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s/%s in %s: %s=%s; a quarantine that began at or before it ends, and its workloads reload once\n",
				target.Source, target.Name, namespace, flap.ReleaseAnnotation, at)
			return err
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the source (default: the kubeconfig context's)")
	cmd.Flags().StringVar(&kubeContext, "context", "", "kubeconfig context to use")
	cmd.Flags().StringVar(&opts.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: $KUBECONFIG, then ~/.kube/config")
	return cmd
}
