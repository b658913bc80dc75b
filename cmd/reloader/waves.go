package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/hashkey"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/sourcecache"
	"github.com/reloader-operator/reloader/internal/waves"
)

// newWavesCommand is `<root> resume|abort <configmap|secret>/<name>`: it writes, on the
// source, the annotation of verb (waves.ResumeAnnotation or waves.AbortAnnotation) naming the
// source's current content hash, so that it applies to that content only: a newer content
// (the fix) starts again from the canary, whatever the annotation says.
func newWavesCommand(root, verb string) *cobra.Command {
	opts := options.Default()
	var namespace, kubeContext, keyNamespace, content string
	annotation, short, long := waves.ResumeAnnotation,
		"Continue the halted health-gated waves of a ConfigMap or Secret past the stalled rollout, for its current content",
		"reloader counts the stalled workloads as done for that content, and the next waves roll."
	if verb == "abort" {
		annotation, short, long = waves.AbortAnnotation,
			"Abort the health-gated waves of a ConfigMap or Secret: the workloads that have not rolled keep their pods",
			"reloader records that content as seen on the workloads that have not rolled, without rolling\nthem; a newer content rolls as usual, in waves."
	}
	cmd := &cobra.Command{
		Use:   verb + " <configmap|secret>/<name>",
		Short: short,
		Long: `Writes the annotation ` + annotation + `: <content hash> on the source (a merge patch, field
manager ` + releaseFieldManager + `; it needs get and patch on the source). ` + long + `
The annotation names the content it applies to: left on the source, it never applies to a
newer content. A Secret's hash is keyed with reloader's hash key (--reloader-namespace); without
access to it, pass --content with the content shown by the WavesHalted Event or reloader explain.`,
		Example: fmt.Sprintf(`  # The canary stalled on a content known to be right: go on with the next waves
  %[1]s %[2]s configmap/shared -n shop

  # A Secret, naming its content as the WavesHalted Event shows it
  %[1]s %[2]s secret/bundle -n shop --content 3f2a9c0d1e7b`, root, verb),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := explain.ParseTarget(args[0])
			if err != nil {
				return err
			}
			if target.Source != source.ConfigMap && target.Source != source.Secret {
				return fmt.Errorf("%q: %s takes a configmap or a secret", args[0], verb)
			}
			conf, cfg, namespace, err := connect(opts, kubeContext, namespace, keyNamespace)
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{})
			if err != nil {
				return err
			}
			obj, err := contentOf(cmd.Context(), c, target.Source, namespace, target.Name, reloaderNamespace(keyNamespace, conf), &content)
			if err != nil {
				return err
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotation: content}}})
			if err := c.Patch(cmd.Context(), obj, client.RawPatch(types.MergePatchType, patch), &client.PatchOptions{FieldManager: releaseFieldManager}); err != nil {
				return fmt.Errorf("%s %s/%s in %s: %w", verb, target.Source, target.Name, namespace, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s/%s in %s: %s=%s (content %s)\n",
				target.Source, target.Name, namespace, annotation, content, waves.Short(content))
			return err
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the source (default: the kubeconfig context's)")
	cmd.Flags().StringVar(&kubeContext, "context", "", "kubeconfig context to use")
	cmd.Flags().StringVar(&keyNamespace, "reloader-namespace", "", "reloader's namespace, where its Secret hash key is (default: $RELOADER_NAMESPACE, $POD_NAMESPACE, else "+defaultKeyNamespace+")")
	cmd.Flags().StringVar(&content, "content", "", "the content hash to "+verb+" (at least its first 12 hex digits); default: the source's current content")
	cmd.Flags().StringVar(&opts.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: $KUBECONFIG, then ~/.kube/config")
	return cmd
}

// contentOf reads the source and, unless *content is given, sets it to the source's content
// hash as reloader computes it; it returns the source, for the patch.
func contentOf(ctx context.Context, c client.Client, kind source.Kind, ns, name, keyNamespace string, content *string) (client.Object, error) {
	var obj client.Object = &corev1.ConfigMap{}
	if kind == source.Secret {
		obj = &corev1.Secret{}
	}
	if *content != "" {
		if len(*content) < 12 {
			return nil, fmt.Errorf("--content %q: want the content hash, or at least its first 12 hex digits", *content)
		}
		obj.SetNamespace(ns)
		obj.SetName(name)
		return obj, nil
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		return nil, fmt.Errorf("get %s/%s in %s: %w", kind, name, ns, err)
	}
	st := sourcecache.ConfigMaps
	if kind == source.Secret {
		key, err := hashkey.Read(ctx, c, keyNamespace)
		if err != nil {
			return nil, fmt.Errorf("a Secret's content hash needs reloader's hash key (--reloader-namespace %s): %w; or pass --content", keyNamespace, err)
		}
		st = sourcecache.Secrets(key)
	}
	*content = st.Hash(obj)
	return obj, nil
}
