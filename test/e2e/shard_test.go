package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/localcluster"
	"github.com/reloader-operator/reloader/internal/proc"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/shard"
	"github.com/reloader-operator/reloader/internal/source"
)

// Replicas with --shards over 30 namespaces, with the API server applying shard selectors
// (feature gate ShardedListAndWatch on) and ignoring them (off): each replica's cache holds
// exactly the namespaces of the shards it leads, about a third; a fourth replica joining
// mid-burst takes its share; a replica SIGKILLed mid-burst has its shards taken over and its
// changes caught up. Across it all every Deployment ends on its ConfigMap's last content and
// no content is rolled out twice.
func TestShardedReplicas(t *testing.T) {
	bin := buildReloader(t)
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("ShardedListAndWatch=%v", gate), func(t *testing.T) { testShardedReplicas(t, bin, gate) })
	}
}

func testShardedReplicas(t *testing.T, bin string, gate bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, localcluster.Options{APIServerFlags: map[string]string{
		"feature-gates": "ShardedListAndWatch=" + strconv.FormatBool(gate)}})
	out := outputLoggedOnFailure(t)

	const own, namespaces, shards = "reloader-system", 30, 12
	space, err := shard.NewSpace(shards)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{own} {
		if err := cluster.EnsureNamespace(ctx, cl, ns); err != nil {
			t.Fatal(err)
		}
	}
	cms := make([]*corev1.ConfigMap, namespaces)
	for k := range namespaces {
		ns, name := fmt.Sprintf("team-%d", k), fmt.Sprintf("app-%d", k)
		if err := cluster.EnsureNamespace(ctx, cl, ns); err != nil {
			t.Fatal(err)
		}
		cms[k] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"round": "0"}}
		for _, o := range []client.Object{cms[k], autoDeployment(ns, name)} {
			if err := cl.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}

	type replica struct {
		p   *proc.Process
		url string
	}
	replicas := map[string]replica{}
	start := func(name string) {
		addr, err := proc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: cluster.Kubeconfig, Prefix: name + " | ", Out: out,
			Args: []string{fmt.Sprintf("--shards=%d", shards), "--metrics-addr=" + addr, "--leader-election-lease-duration=4s",
				"--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms"},
			Env: []string{"POD_NAME=" + name, "POD_NAMESPACE=" + own}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		replicas[name] = replica{p: p, url: "http://" + addr + "/metrics"}
	}
	// holders maps each shard to the replica holding its Lease now.
	holders := func() map[int]string {
		var leases coordinationv1.LeaseList
		if err := cl.List(ctx, &leases, client.InNamespace(own), client.HasLabels{shard.ShardLabel}); err != nil {
			t.Fatal(err)
		}
		h := map[int]string{}
		for _, l := range leases.Items {
			i, err := strconv.Atoi(strings.TrimPrefix(l.Name, "reloader-shard-"))
			if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				h[i] = *l.Spec.HolderIdentity
			}
		}
		return h
	}
	// balanced waits until the live replicas hold every shard between them, in even shares,
	// each as its own metric says too.
	balanced := func(live ...string) {
		waitFor(t, ctx, fmt.Sprintf("%d shards shared by %v", shards, live), func() (bool, error) {
			h := holders()
			count := map[string]int{}
			for _, who := range h {
				count[who]++
			}
			if len(h) != shards {
				return false, nil
			}
			for _, name := range live {
				want := shards / len(live)
				if count[name] < want || count[name] > want+1 || gauge(replicas[name].url, "reloader_shards_owned", "") != count[name] {
					return false, nil
				}
			}
			return true, nil
		})
	}
	// cachedSlices checks that each live replica caches exactly the Deployments and ConfigMaps
	// of the namespaces its shards hold, and logs its share.
	cachedSlices := func(live ...string) {
		h := holders()
		var deployments appsv1.DeploymentList
		var configMaps corev1.ConfigMapList
		if err := cl.List(ctx, &deployments); err != nil {
			t.Fatal(err)
		}
		if err := cl.List(ctx, &configMaps); err != nil {
			t.Fatal(err)
		}
		for _, name := range live {
			want := map[string]int{}
			nss := map[string]bool{}
			for _, d := range deployments.Items {
				if h[space.Of(d.Namespace)] == name {
					want["Deployment"]++
					nss[d.Namespace] = true
				}
			}
			for _, c := range configMaps.Items {
				if h[space.Of(c.Namespace)] == name {
					want["ConfigMap"]++
				}
			}
			waitFor(t, ctx, name+"'s cache to hold its slice", func() (bool, error) {
				return gauge(replicas[name].url, "reloader_cached_objects", `kind="Deployment"`) == want["Deployment"] &&
					gauge(replicas[name].url, "reloader_cached_objects", `kind="ConfigMap"`) == want["ConfigMap"], nil
			})
			t.Logf("%s caches %d of %d Deployments (%d of %d namespaces) and %d of %d ConfigMaps",
				name, want["Deployment"], len(deployments.Items), len(nss), namespaces, want["ConfigMap"], len(configMaps.Items))
			if share := float64(want["Deployment"]) / float64(len(deployments.Items)); share < 0.5/float64(len(live)) || share > 1.6/float64(len(live)) {
				t.Errorf("%s caches %.0f%% of the Deployments, far from 1/%d", name, 100*share, len(live))
			}
		}
	}

	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		start(name)
	}
	balanced("replica-a", "replica-b", "replica-c")
	mode := "client"
	if gate {
		mode = "server"
	}
	if got := gauge(replicas["replica-a"].url, "reloader_shard_filtering", `mode="`+mode+`"`); got != 1 {
		t.Errorf("reloader_shard_filtering{mode=%q} = %d, want 1", mode, got)
	}
	for _, cm := range cms {
		waitFor(t, ctx, cm.Namespace+" recorded", func() (bool, error) {
			var d appsv1.Deployment
			err := cl.Get(ctx, client.ObjectKeyFromObject(cm), &d)
			_, ok := d.Annotations[reload.RecordAnnotation]
			return ok, err
		})
	}
	cachedSlices("replica-a", "replica-b", "replica-c")

	seen := watchTemplates(t, ctx, cluster.Config, "")
	const rounds, joinAt, killAt = 8, 2, 6
	for round := 1; round <= rounds; round++ {
		for _, cm := range cms {
			cm.Data["round"] = strconv.Itoa(round)
			if err := cl.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}
		}
		switch round {
		case joinAt:
			before := holders()
			start("replica-d")
			t.Logf("replica-d started after round %d", round)
			balanced("replica-a", "replica-b", "replica-c", "replica-d")
			after := holders()
			moved := 0
			for i := range after {
				if before[i] != after[i] {
					moved++
				}
			}
			t.Logf("shards after replica-d joined: %v (%d of %d moved)", after, moved, shards)
		case killAt:
			replicas["replica-b"].p.Kill()
			t.Logf("replica-b killed after round %d", round)
		}
		time.Sleep(500 * time.Millisecond)
	}
	balanced("replica-a", "replica-c", "replica-d")
	t.Logf("shards after replica-b died: %v", holders())

	envName := func(cm *corev1.ConfigMap) string {
		return reload.EnvVarName(source.ID{Kind: source.ConfigMap, Name: cm.Name})
	}
	waitFor(t, ctx, "every Deployment on its ConfigMap's last content", func() (bool, error) {
		for _, cm := range cms {
			if seen.last(cm.Name, envName(cm)) != hash.ConfigMap(cm) {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(3 * time.Second) // room for a late duplicate to show up
	total := 0
	for _, cm := range cms {
		values := seen.values(cm.Name, envName(cm))
		distinct := map[string]bool{}
		for _, v := range values {
			distinct[v] = true
		}
		total += len(values)
		if len(values) != len(distinct) || len(values) > rounds {
			t.Errorf("%s/%s: %d template changes carrying %d distinct contents over %d rounds", cm.Namespace, cm.Name, len(values), len(distinct), rounds)
		}
	}
	t.Logf("%d rollouts of %d Deployments over %d rounds, none missed, none repeated", total, namespaces, rounds)
	cachedSlices("replica-a", "replica-c", "replica-d")
}

// autoDeployment is a Deployment named name that reloads on its ConfigMap of the same name.
func autoDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"reloader.stakater.com/auto": "true"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "busybox", EnvFrom: []corev1.EnvFromSource{{
					ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}},
			}},
		},
	}
}

// gauge reads one integer sample from a /metrics page: -1 when absent or unreachable.
func gauge(url, name, labels string) int {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	series := name
	if labels != "" {
		series += "{" + labels + "}"
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return -1
	}
	return int(v)
}
