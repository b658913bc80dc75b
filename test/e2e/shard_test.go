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
	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/shard"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// Replicas with --shards over 30 namespaces, with the API server applying shard selectors
// (feature gate ShardedListAndWatch on) and ignoring them (off): each replica's cache holds
// exactly the namespaces of the shards it leads, about a third; a fourth replica joining
// mid-burst takes its share; a replica SIGKILLed mid-burst has its shards taken over and its
// changes caught up. Across it all every Deployment ends on its ConfigMap's last content and
// no content is rolled out twice.
func TestShardedReplicas(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("ShardedListAndWatch=%v", gate), func(t *testing.T) { testShardedReplicas(t, bin, gate) })
	}
}

func testShardedReplicas(t *testing.T, bin string, gate bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{APIServerFlags: map[string]string{
		"feature-gates": "ShardedListAndWatch=" + strconv.FormatBool(gate)}})
	out := outputLoggedOnFailure(t)

	const own, namespaces, shards = "reloader-system", 30, 12
	space, err := shard.NewSpace(shards)
	testutil.Must(t, err)
	for _, ns := range []string{own} {
		testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
	}
	cms := make([]*corev1.ConfigMap, namespaces)
	for k := range namespaces {
		ns, name := fmt.Sprintf("team-%d", k), fmt.Sprintf("app-%d", k)
		testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
		cms[k] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"round": "0"}}
		for _, o := range []client.Object{cms[k], objects.AutoDeployment(ns, name, name)} {
			testutil.Must(t, cl.Create(ctx, o))
		}
	}

	type replica struct {
		p   *proc.Process
		url string
	}
	replicas := map[string]replica{}
	start := func(name string) {
		addr, err := proc.FreeAddr()
		testutil.Must(t, err)
		p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: cluster.Kubeconfig, Prefix: name + " | ", Out: out,
			Args: []string{fmt.Sprintf("--shards=%d", shards), "--metrics-addr=" + addr, "--leader-election-lease-duration=4s",
				"--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms"},
			Env: []string{"POD_NAME=" + name, "POD_NAMESPACE=" + own}})
		testutil.Must(t, err)
		t.Cleanup(p.Stop)
		replicas[name] = replica{p: p, url: "http://" + addr + "/metrics"}
	}
	// holders maps each shard to the replica holding its Lease now.
	holders := func() map[int]string {
		var leases coordinationv1.LeaseList
		testutil.Must(t, cl.List(ctx, &leases, client.InNamespace(own), client.HasLabels{shard.ShardLabel}))
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
		testutil.Eventually(t, fmt.Sprintf("%d shards shared by %v", shards, live), testutil.Cond(func() (bool, error) {
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
		}))
	}
	// cachedSlices checks that each live replica caches exactly the Deployments and ConfigMaps
	// of the namespaces its shards hold, and logs its share.
	cachedSlices := func(live ...string) {
		// slice counts the Deployments and ConfigMaps of the namespaces whose shards name holds
		// now (read again at each try: under load a Lease may change hands meanwhile).
		slice := func(name string) (want map[string]int, nss map[string]bool, all int) {
			h := holders()
			var deployments appsv1.DeploymentList
			var configMaps corev1.ConfigMapList
			testutil.Must(t, cl.List(ctx, &deployments))
			testutil.Must(t, cl.List(ctx, &configMaps))
			want, nss = map[string]int{}, map[string]bool{}
			for _, d := range deployments.Items {
				if h[space.Of(d.Namespace)] == name {
					want["Deployment"]++
					nss[d.Namespace] = true
				}
			}
			for _, c := range configMaps.Items {
				// The ledger's ConfigMaps (in reloader's namespace) are not sources: not cached.
				if _, ledgered := c.Labels[ledger.Label]; !ledgered && h[space.Of(c.Namespace)] == name {
					want["ConfigMap"]++
				}
			}
			return want, nss, len(deployments.Items)
		}
		for _, name := range live {
			var want map[string]int
			var nss map[string]bool
			var all int
			testutil.Eventually(t, name+"'s cache to hold its slice", func() error {
				want, nss, all = slice(name)
				d := gauge(replicas[name].url, "reloader_cached_objects", `kind="Deployment"`)
				c := gauge(replicas[name].url, "reloader_cached_objects", `kind="ConfigMap"`)
				if d != want["Deployment"] || c != want["ConfigMap"] {
					return fmt.Errorf("caches %d Deployments and %d ConfigMaps, its shards hold %d and %d", d, c, want["Deployment"], want["ConfigMap"])
				}
				return nil
			})
			t.Logf("%s caches %d of %d Deployments (%d of %d namespaces) and %d ConfigMaps",
				name, want["Deployment"], all, len(nss), namespaces, want["ConfigMap"])
			if share := float64(want["Deployment"]) / float64(all); share < 0.5/float64(len(live)) || share > 1.6/float64(len(live)) {
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
		testutil.Eventually(t, cm.Namespace+" recorded", testutil.Cond(func() (bool, error) {
			var d appsv1.Deployment
			if err := cl.Get(ctx, client.ObjectKeyFromObject(cm), &d); err != nil {
				return false, err
			}
			return records.Recorded(ctx, cl, &d)
		}))
	}
	cachedSlices("replica-a", "replica-b", "replica-c")

	seen := watchTemplates(t, ctx, cluster.Config, "")
	const rounds, joinAt, killAt = 8, 2, 6
	for round := 1; round <= rounds; round++ {
		for _, cm := range cms {
			cm.Data["round"] = strconv.Itoa(round)
			testutil.Must(t, cl.Update(ctx, cm))
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
	testutil.Eventually(t, "every Deployment on its ConfigMap's last content", testutil.Cond(func() (bool, error) {
		for _, cm := range cms {
			if seen.last(cm.Name, envName(cm)) != hash.ConfigMap(cm) {
				return false, nil
			}
		}
		return true, nil
	}))
	settled(t, "the live replicas", replicas["replica-a"].url, replicas["replica-c"].url, replicas["replica-d"].url) // room for a late duplicate
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
