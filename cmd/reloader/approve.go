package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/app"
	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/approve"
	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/options"
)

// newApproveCommand is `<root> approve <kind>/<name>`: it approves the reload a workload in
// mode approve waits for, by writing the digest of the pending content into the workload's
// approval annotation (internal/approve).
func newApproveCommand(root string) *cobra.Command {
	opts := options.Default()
	// Where no annotation sets a mode, the install's --mode is approve: this command is for
	// workloads that wait for approval.
	opts.Mode = string(approval.Approve)
	var namespace, kubeContext, keyNamespace, digest string
	cmd := &cobra.Command{
		Use:   "approve <kind>/<name>",
		Short: "Approve the reload a workload in mode approve waits for: it rolls once, on the content approved",
		Long: `Approve reads the digest of the content the workload's reload waits for, as reloader
publishes it on the workload (annotation ` + approval.PendingAnnotation + `), and writes the annotation
` + approval.ApprovedAnnotation + `: <that digest> on the workload (a merge patch, field manager
` + approve.FieldManager + `; it needs get and patch on the workload, and no read of reloader's hash
key). reloader rolls the workload only while the due content is the one approved, once, and
removes the annotation in the same write. A newer content is not rolled by this approval: it
waits for its own.

Pass --digest with the digest you reviewed (from explain, or the ApprovalPending Event) to
refuse the approval if the content changed since. Where reloader published no digest (a
version before it did), the pending content is computed as explain does, which reads
reloader's hash key for Secrets.`,
		Example: fmt.Sprintf(`  # What waits, and since when?
  %[1]s explain deployment/web -n shop

  # Roll it
  %[1]s approve deployment/web -n shop

  # Roll it only if it is still the content reviewed
  %[1]s approve deployment/web -n shop --digest 4ee619c04a990bb28da0d28fe9910dd9`, root),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := explain.ParseTarget(args[0])
			if err != nil {
				return err
			}
			if target.Workload == nil {
				return fmt.Errorf("%q: approve takes a workload, such as deployment/web", args[0])
			}
			conf, cfg, namespace, err := connect(opts, kubeContext, namespace, keyNamespace)
			if err != nil {
				return err
			}
			scheme, err := app.NewScheme()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return err
			}
			// Only when reloader published no digest on the workload: explain's reads, the
			// hash key among them.
			explainer := func(ctx context.Context) (*explain.Explainer, error) {
				return explain.New(ctx, cfg, conf, namespace, reloaderNamespace(keyNamespace, conf))
			}
			a, err := approve.Approve(cmd.Context(), c, target.Workload, namespace, target.Name, digest, explainer)
			if err != nil {
				return err
			}
			what := strings.Join(a.Sources, ", ")
			if a.Published {
				what = "the content reloader published as pending"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s/%s in %s: approved %s (%s); reloader rolls it once\n",
				strings.ToLower(target.Workload.Name()), target.Name, namespace, a.Digest, what)
			return err
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the workload (default: the kubeconfig context's)")
	cmd.Flags().StringVar(&kubeContext, "context", "", "kubeconfig context to use")
	cmd.Flags().StringVar(&keyNamespace, "reloader-namespace", "", "reloader's namespace, where its Secret hash key is (default: $RELOADER_NAMESPACE, $POD_NAMESPACE, else "+defaultKeyNamespace+")")
	cmd.Flags().StringVar(&digest, "digest", "", "approve only if the pending content is this one (the digest explain and the ApprovalPending Event show)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return options.ExplainFlagError(err) })
	opts.BindFlags(cmd.Flags())
	return cmd
}
