package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/reloader-operator/reloader/internal/explain"
	"github.com/reloader-operator/reloader/internal/options"
	"github.com/reloader-operator/reloader/internal/source"
)

// exitRolls is plan's exit code when something would roll, for CI gates; 1 is an error.
const exitRolls = 2

// exitCode is an error that only sets the exit code: the command has said all it had to.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// exitStatus is the process exit code for what a command returned.
func exitStatus(err error) int {
	var c exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &c):
		return int(c)
	}
	return 1
}

// maxManifest bounds each file plan reads: a ConfigMap or Secret holds at most 1 MiB, which a
// Secret's base64 in YAML makes about 1.4 MiB.
const maxManifest = 3 << 19 // 1.5 MiB

// newPlanCommand is `<root> plan -f FILE`, root being how the user calls the binary
// (reloader, or kubectl reloader), which the examples show: what applying the file's
// ConfigMaps and Secrets would roll. It takes the controller's flags, as explain does.
func newPlanCommand(root string) *cobra.Command {
	opts := options.Default()
	var namespace, kubeContext, output, keyNamespace string
	var files []string
	cmd := &cobra.Command{
		Use:   "plan [configmap/<name> | secret/<name>] -f FILE",
		Short: "Show which workloads applying ConfigMaps or Secrets would roll, how many pods, and when",
		Long: `Plan reads the cluster (read-only) and decides with the controller's code what applying
the ConfigMaps and Secrets of FILE would do: each document against the live object of its
name (absent: a create), or, given configmap/<name> or secret/<name>, that live object against
the file's one document.

For each workload that uses or names them: whether it rolls and why (or why not: keys it does
not use, excluded, ignored, paused, first seen, ...), its pods, and when, given the coalescing
window, min-reload-interval, reload windows, pause periods and --reload-rate. Pass the
controller's own flags (annotation names, --reload-rate, --coalesce-window, ...) when the
install changed them.

Exit status: 0 when nothing would roll, 2 when something would, 1 on error. Secret values are
never printed: only key names and hashes.`,
		Example: fmt.Sprintf(`  # What would applying app-config.yaml roll, and when?
  %[1]s plan -f app-config.yaml

  # The live ConfigMap app-config against the content of new.yaml
  %[1]s plan configmap/app-config -n shop -f new.yaml

  # From standard input, as JSON, with the install's rate limit
  helm template ... | %[1]s plan -f - -o json --reload-rate=20`, root),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 {
				return errors.New("-f FILE is required: the manifest of the ConfigMaps or Secrets to plan (- for standard input)")
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			var objs []client.Object
			for _, f := range files {
				got, err := readManifests(f, cmd.InOrStdin())
				if err != nil {
					return err
				}
				objs = append(objs, got...)
			}
			if len(args) == 1 {
				var err error
				if objs, err = asTarget(args[0], objs); err != nil {
					return err
				}
			}
			for _, o := range objs {
				if o.GetName() == "" {
					return fmt.Errorf("a %s without a name: name it in the file, or name the live object (plan configmap/<name> -f FILE)", kindOf(o))
				}
			}
			ns, err := planNamespace(namespace, objs)
			if err != nil {
				return err
			}
			conf, cfg, ns, err := connect(opts, kubeContext, ns, keyNamespace)
			if err != nil {
				return err
			}
			p, err := explain.NewPlanner(cmd.Context(), cfg, conf, ns, reloaderNamespace(keyNamespace, conf), objs)
			if err != nil {
				return err
			}
			plan, err := p.Plan(cmd.Context())
			if err != nil {
				return err
			}
			if err := write(cmd.OutOrStdout(), plan, output); err != nil {
				return err
			}
			if plan.Rolls() {
				cmd.SilenceErrors = true // the plan said it; the status is for scripts
				return exitCode(exitRolls)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "manifest of the ConfigMaps and Secrets to plan, YAML or JSON, several documents allowed; - reads standard input (repeatable)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the sources (default: the documents', else the kubeconfig context's)")
	cmd.Flags().StringVar(&kubeContext, "context", "", "kubeconfig context to use")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&keyNamespace, "reloader-namespace", "", "reloader's namespace, where its Secret hash key is; read only if you may (default: $RELOADER_NAMESPACE, $POD_NAMESPACE, else "+defaultKeyNamespace+")")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return options.ExplainFlagError(err) })
	opts.BindFlags(cmd.Flags())
	return cmd
}

// readManifests reads the ConfigMaps and Secrets of a file ("-": stdin), at most maxManifest
// bytes, every document checked as the API server would check it.
func readManifests(name string, stdin io.Reader) ([]client.Object, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxManifest {
		return nil, fmt.Errorf("%s is over %d KiB: a ConfigMap or Secret holds at most 1 MiB; plan fewer documents at a time", name, maxManifest>>10)
	}
	objs, err := decodeManifests(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s holds no document", name)
	}
	return objs, nil
}

// decodeManifests decodes YAML or JSON documents, and the items of v1 Lists, into ConfigMaps
// and Secrets. Unknown fields are errors: a misspelt "data" would plan an empty ConfigMap.
func decodeManifests(data []byte) ([]client.Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []client.Object
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		js, err := sigsyaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: not valid YAML: %w", doc, err)
		}
		if s := strings.TrimSpace(string(js)); s == "null" || s == "" {
			continue // an empty document
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			return nil, fmt.Errorf("document %d: not an object: %w", doc, err)
		}
		u := &unstructured.Unstructured{Object: m}
		items := []unstructured.Unstructured{*u}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			items = l.Items
		}
		for i := range items {
			obj, err := sourceObject(&items[i])
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", doc, err)
			}
			out = append(out, obj)
		}
	}
}

// sourceObject converts a document to a ConfigMap or Secret and checks it as the API server
// would: its name, its keys and its size.
func sourceObject(u *unstructured.Unstructured) (client.Object, error) {
	var obj client.Object
	switch gvk := u.GroupVersionKind(); {
	case gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "ConfigMap":
		obj = &corev1.ConfigMap{}
	case gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Secret":
		obj = &corev1.Secret{}
	default:
		what := strings.TrimPrefix(gvk.GroupVersion().String()+" "+gvk.Kind, " ")
		if gvk.Kind == "" {
			what = "a document without apiVersion and kind"
		}
		return nil, fmt.Errorf("%s %q: only v1 ConfigMaps and Secrets can be planned", what, u.GetName())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		return nil, fmt.Errorf("%s %q: %w", u.GetKind(), u.GetName(), err)
	}
	what := u.GetKind() + " " + u.GetName()
	if problems := validation.IsDNS1123Subdomain(obj.GetName()); obj.GetName() != "" && len(problems) > 0 {
		return nil, fmt.Errorf("%s: name: %s", what, strings.Join(problems, "; "))
	}
	size := 0
	check := func(k string, n int) error {
		size += n
		if problems := validation.IsConfigMapKey(k); len(problems) > 0 {
			return fmt.Errorf("%s: key %q: %s", what, k, strings.Join(problems, "; "))
		}
		return nil
	}
	var err error
	switch v := obj.(type) {
	case *corev1.ConfigMap:
		for k, s := range v.Data {
			err = errors.Join(err, check(k, len(s)))
		}
		for k, b := range v.BinaryData {
			err = errors.Join(err, check(k, len(b)))
		}
	case *corev1.Secret:
		for k, b := range v.Data {
			err = errors.Join(err, check(k, len(b)))
		}
		for k, s := range v.StringData {
			err = errors.Join(err, check(k, len(s)))
		}
	}
	if err != nil {
		return nil, err
	}
	if size > corev1.MaxSecretSize {
		return nil, fmt.Errorf("%s: %d bytes of data, over the API server's limit of %d", what, size, corev1.MaxSecretSize)
	}
	return obj, nil
}

// asTarget takes the content of the file's one document as the proposed content of the live
// source named by target ("configmap/name").
func asTarget(target string, objs []client.Object) ([]client.Object, error) {
	t, err := explain.ParseTarget(target)
	if err != nil {
		return nil, err
	}
	if t.Workload != nil {
		return nil, fmt.Errorf("%s: plan takes a ConfigMap or a Secret, not a workload", target)
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%s: the file must hold one document, its proposed content; it holds %d", target, len(objs))
	}
	obj := objs[0]
	if kindOf(obj) != t.Source.Title() {
		return nil, fmt.Errorf("%s: the file holds a %s, not a %s", target, kindOf(obj), t.Source.Title())
	}
	obj.SetName(t.Name)
	return objs, nil
}

// planNamespace is the -n flag, else the documents' one namespace ("" when they name none:
// the context's then).
func planNamespace(flag string, objs []client.Object) (string, error) {
	ns := flag
	for _, o := range objs {
		switch d := o.GetNamespace(); {
		case d == "":
		case ns == "":
			ns = d
		case d != ns:
			if flag != "" {
				return "", fmt.Errorf("%s is in namespace %s, not %s (-n)", o.GetName(), d, flag)
			}
			return "", fmt.Errorf("the documents are in namespaces %s and %s: plan one namespace at a time", ns, d)
		}
	}
	return ns, nil
}

// kindOf names the kind of a decoded source.
func kindOf(o client.Object) string {
	if _, ok := o.(*corev1.Secret); ok {
		return source.Secret.Title()
	}
	return source.ConfigMap.Title()
}
