// Package demo shows reloader at work on a local cluster: a Deployment reads a ConfigMap,
// the ConfigMap changes, and the Deployment rolls to new pods; `reloader explain` tells why;
// then two writers fight over the ConfigMap and the flap breaker quarantines it. `make demo`
// runs it, and an end-to-end test runs the same steps against the built binary.
package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

const (
	namespace = "demo"
	name      = "demo"
	configMap = "demo-config"
)

// ownNamespace is reloader's own namespace: its hash key's Secret lives there, and Job
// replacement records are signed with that key.
const ownNamespace = "reloader"

// The field managers of the demo's writes: a person's edit, then a pipeline that keeps
// writing its own value back.
const (
	editor   = "kubectl-edit"
	pipeline = "ci-pipeline"
)

// Result is what the demo observed.
type Result struct {
	OldReplicaSet, NewReplicaSet string
	EnvVar                       string
	ReloadsCounted               string
	// Explain is what `reloader explain deployment/demo -n demo` printed.
	Explain string
	// Quarantine is the SourceQuarantined Event's note on the Deployment.
	Quarantine string
}

// Options configure a demo run.
type Options struct {
	// ReloaderBinary is the reloader executable to run against the cluster.
	ReloaderBinary string
	ReloaderArgs   []string
	// Keep leaves the cluster and reloader running until ctx ends.
	Keep bool
	// Verbose shows everything reloader logs; otherwise only what it logs about the objects
	// it reconciles, its warnings and its errors.
	Verbose bool
	Out     io.Writer
}

// Run starts a local cluster with real rollouts, runs reloader on it and walks through a
// reload, explain, and the flap breaker, printing each step.
func Run(ctx context.Context, opts Options) (*Result, error) {
	out := opts.Out
	say := func(format string, args ...any) { fmt.Fprintf(out, "==> "+format+"\n", args...) }

	say("starting a local control plane (etcd, kube-apiserver, controller-manager, scheduler, 2 kwok nodes)")
	cluster, err := testenv.Start(ctx, testenv.Options{Rollouts: true, Nodes: 2})
	if err != nil {
		return nil, err
	}
	defer cluster.Stop()
	cl, err := client.New(cluster.Config, client.Options{})
	if err != nil {
		return nil, err
	}
	for _, ns := range []string{ownNamespace, namespace} {
		if err := cluster.EnsureNamespace(ctx, cl, ns); err != nil {
			return nil, err
		}
	}

	metricsAddr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	say("starting %s in namespace %s (metrics on http://%s/metrics)", opts.ReloaderBinary, ownNamespace, metricsAddr)
	// The probes stay on the metrics port: upstream v2's :8080 is for its chart, and may be
	// taken on a developer's machine (a busy one is a warning the demo has no reason to show).
	spec := proc.Spec{Bin: opts.ReloaderBinary, Args: []string{"--metrics-addr=" + metricsAddr, "--v2-health-addr=0"},
		Kubeconfig: cluster.Kubeconfig, Env: ownEnv(), Prefix: "    reloader | ", Out: out}
	if !opts.Verbose {
		spec.Args = append(spec.Args, "--log-format=json")
		spec.Prefix, spec.Out = "", &decisionLines{out: out, prefix: spec.Prefix}
	}
	spec.Args = append(spec.Args, opts.ReloaderArgs...)
	reloader, err := proc.Run(spec)
	if err != nil {
		return nil, err
	}
	defer reloader.Stop()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: configMap}, Data: map[string]string{"GREETING": "hello"}}
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "busybox",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}},
				}}},
			},
		},
	}
	say("creating ConfigMap %s/%s and Deployment %s/%s (annotation reloader.stakater.com/auto: \"true\")", namespace, configMap, namespace, name)
	for _, o := range []client.Object{cm, d} {
		if err := cl.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	oldRS, err := waitRolledOut(ctx, cl, out)
	if err != nil {
		return nil, err
	}
	if err := poll(ctx, "reloader to record the Deployment's sources", func() (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return false, err
		}
		return records.Recorded(ctx, cl, d) // on it, or in reloader's ledger of first records
	}); err != nil {
		return nil, err
	}

	say("editing ConfigMap %s as %s: GREETING=hello -> GREETING=hello, reloaded", configMap, editor)
	if err := setGreeting(ctx, cl, editor, "hello, reloaded"); err != nil {
		return nil, err
	}
	var newRS string
	if err := poll(ctx, "a new ReplicaSet", func() (bool, error) {
		rs, err := newestReplicaSet(ctx, cl)
		newRS = rs
		return err == nil && rs != "" && rs != oldRS, err
	}); err != nil {
		return nil, err
	}
	if _, err := waitRolledOut(ctx, cl, out); err != nil {
		return nil, err
	}
	res := &Result{OldReplicaSet: oldRS, NewReplicaSet: newRS}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		return nil, err
	}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, reload.EnvVarPrefix) {
			res.EnvVar = e.Name + "=" + e.Value
		}
	}
	say("reloader wrote %s into the pod template; ReplicaSet %s replaced %s", short(res.EnvVar), newRS, oldRS)
	res.ReloadsCounted = scrape(metricsAddr, "reloader_reload_executed_total{success=\"true\"}")
	say("metrics: reloader_reload_executed_total{success=\"true\"} %s", res.ReloadsCounted)

	say("reloader explain deployment/%s -n %s   (why it reloads: sources, hashes, last reloads)", name, namespace)
	if res.Explain, err = explain(ctx, opts.ReloaderBinary, cluster.Kubeconfig); err != nil {
		return nil, err
	}
	for _, l := range strings.Split(strings.TrimRight(res.Explain, "\n"), "\n") {
		if l != "" {
			l = "    " + l
		}
		fmt.Fprintln(out, l)
	}

	if res.Quarantine, err = flapping(ctx, cl, say); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "    Warning SourceQuarantined deployment/%s: %s\n", name, res.Quarantine)
	reloads := scrape(metricsAddr, "reloader_reload_executed_total{success=\"true\"}")
	say("metrics: reloader_reload_executed_total{success=\"true\"} %s (the edit, and the fight until the breaker tripped)", reloads)

	if opts.Keep {
		say("cluster stays up: export KUBECONFIG=%s (Ctrl-C ends the demo)", cluster.Kubeconfig)
		<-ctx.Done()
	}
	say("demo done: an edit rolled the Deployment once; a fight between two writers was stopped")
	return res, nil
}

// short cuts a hash (or NAME=hash) to the 12 characters explain shows too.
func short(hash string) string {
	name, h, ok := strings.Cut(hash, "=")
	if !ok {
		name, h = "", hash
	}
	if len(h) > 12 {
		h = h[:12] + "..."
	}
	if ok {
		return name + "=" + h
	}
	return h
}

// ownEnv is the environment a chart install gives reloader: its own namespace, where its hash
// key lives.
func ownEnv() []string {
	return []string{"RELOADER_NAMESPACE=" + ownNamespace, "POD_NAMESPACE=" + ownNamespace}
}

// setGreeting writes the ConfigMap's GREETING as manager, which its managedFields record.
func setGreeting(ctx context.Context, cl client.Client, manager, value string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: configMap}}
	patch := fmt.Appendf(nil, `{"data":{"GREETING":%q}}`, value)
	return cl.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(manager))
}

// explain runs `reloader explain deployment/demo -n demo` against the cluster, as a user would.
func explain(ctx context.Context, bin, kubeconfig string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, "explain", "deployment/"+name, "-n", namespace)
	cmd.Env = append(os.Environ(), append(ownEnv(), "KUBECONFIG="+kubeconfig)...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("reloader explain: %w\n%s", err, b)
	}
	return string(b), nil
}

// waitRolledOut waits until the Deployment's pods all run its current template, then lists them.
func waitRolledOut(ctx context.Context, cl client.Client, out io.Writer) (string, error) {
	var rs string
	err := poll(ctx, "the rollout to complete", func() (bool, error) {
		var d appsv1.Deployment
		if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &d); err != nil {
			return false, err
		}
		s := d.Status
		want := *d.Spec.Replicas
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
			return false, nil
		}
		var err error
		rs, err = newestReplicaSet(ctx, cl)
		return rs != "", err
	})
	if err != nil {
		return "", err
	}
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app": name}); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			fmt.Fprintf(out, "    pod %-32s %-8s node %s\n", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}
	return rs, nil
}

func newestReplicaSet(ctx context.Context, cl client.Client) (string, error) {
	var list appsv1.ReplicaSetList
	if err := cl.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{"app": name}); err != nil {
		return "", err
	}
	newest := ""
	var rev string
	for _, rs := range list.Items {
		r := rs.Annotations["deployment.kubernetes.io/revision"]
		if newest == "" || len(r) > len(rev) || (len(r) == len(rev) && r > rev) {
			newest, rev = rs.Name, r
		}
	}
	return newest, nil
}

func poll(ctx context.Context, what string, cond func() (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// scrape returns the value of one sample from a /metrics page, or "?" if absent.
func scrape(addr, sample string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "?"
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			return v
		}
	}
	return "?"
}
