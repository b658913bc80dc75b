// Package demo shows reloader at work on a local cluster: a Deployment reads a ConfigMap,
// the ConfigMap changes, and the Deployment rolls to new pods. `make demo` runs it, and an
// end-to-end test runs the same steps against the built binary.
package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/devtools/localcluster"
	"github.com/reloader-operator/reloader/internal/devtools/proc"
	"github.com/reloader-operator/reloader/internal/reload"
)

const (
	namespace = "demo"
	name      = "demo"
	configMap = "demo-config"
)

// Result is what the demo observed.
type Result struct {
	OldReplicaSet, NewReplicaSet string
	EnvVar                       string
	ReloadsCounted               string
}

// Options configure a demo run.
type Options struct {
	// ReloaderBinary is the reloader executable to run against the cluster.
	ReloaderBinary string
	ReloaderArgs   []string
	// Keep leaves the cluster and reloader running until ctx ends.
	Keep bool
	Out  io.Writer
}

// Run starts a local cluster with real rollouts, runs reloader on it and walks through a
// reload, printing each step.
func Run(ctx context.Context, opts Options) (*Result, error) {
	out := opts.Out
	say := func(format string, args ...any) { fmt.Fprintf(out, "==> "+format+"\n", args...) }

	say("starting a local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok nodes)")
	cluster, err := localcluster.Start(ctx, localcluster.Options{Rollouts: true, Nodes: 2})
	if err != nil {
		return nil, err
	}
	defer cluster.Stop()
	cl, err := client.New(cluster.Config, client.Options{})
	if err != nil {
		return nil, err
	}

	metricsAddr, err := proc.FreeAddr()
	if err != nil {
		return nil, err
	}
	say("starting %s (metrics on http://%s/metrics)", opts.ReloaderBinary, metricsAddr)
	args := append([]string{"--metrics-addr=" + metricsAddr}, opts.ReloaderArgs...)
	stopReloader, err := proc.Start(opts.ReloaderBinary, args, cluster.Kubeconfig, "    reloader | ", out)
	if err != nil {
		return nil, err
	}
	defer stopReloader()

	if err := cluster.EnsureNamespace(ctx, cl, namespace); err != nil {
		return nil, err
	}
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
		_, ok := d.Annotations[reload.RecordAnnotation]
		return ok, nil
	}); err != nil {
		return nil, err
	}

	say("changing ConfigMap %s: GREETING=hello -> GREETING=hello, reloaded", configMap)
	if err := cl.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		return nil, err
	}
	cm.Data["GREETING"] = "hello, reloaded"
	if err := cl.Update(ctx, cm); err != nil {
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
	say("reloader wrote %s into the pod template; ReplicaSet %s replaced %s", res.EnvVar, newRS, oldRS)
	res.ReloadsCounted = scrape(metricsAddr, "reloader_reload_executed_total{success=\"true\"}")
	say("metrics: reloader_reload_executed_total{success=\"true\"} %s", res.ReloadsCounted)

	if opts.Keep {
		say("cluster stays up: export KUBECONFIG=%s (Ctrl-C ends the demo)", cluster.Kubeconfig)
		<-ctx.Done()
	}
	return res, nil
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
