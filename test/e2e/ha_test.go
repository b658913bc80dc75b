package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
	"github.com/reloader-operator/reloader/internal/testutil/follower"
	"github.com/reloader-operator/reloader/internal/testutil/objects"
	"github.com/reloader-operator/reloader/internal/testutil/records"
)

// Two replicas with --enable-ha against one control plane. The leader is killed (SIGKILL, no
// Lease release) in the middle of a burst of ConfigMap changes. The follower reports ready
// before it leads, takes over, catches up the changes made during the failover, and restarts
// nothing twice: every Deployment ends on its ConfigMap's last content, and each pod-template
// change carries content never rolled out before.
func TestLeaderKilledDuringBurst(t *testing.T) {
	t.Parallel() // its own control plane and reloader
	bin := buildReloader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, cl := startCluster(t, ctx, testenv.Options{})
	out := outputLoggedOnFailure(t)

	const ns, workloads, rounds, killAfter = "ha", 10, 6, 3
	testutil.Must(t, cluster.EnsureNamespace(ctx, cl, ns))
	cms := make([]*corev1.ConfigMap, workloads)
	for i := range workloads {
		name := fmt.Sprintf("app-%d", i)
		cms[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"round": "0"}}
		d := objects.AutoDeployment(ns, name, name)
		for _, o := range []client.Object{cms[i], d} {
			testutil.Must(t, cl.Create(ctx, o))
		}
	}

	replica := func(name string) (*proc.Process, string) {
		addr, err := proc.FreeAddr()
		testutil.Must(t, err)
		p, err := proc.Run(proc.Spec{Bin: bin, Kubeconfig: cluster.Kubeconfig, Prefix: name + " | ", Out: out,
			Args: []string{"--enable-ha", "--metrics-addr=" + addr, "--leader-election-lease-duration=4s",
				"--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms"},
			Env: []string{"POD_NAME=" + name, "POD_NAMESPACE=" + ns}})
		testutil.Must(t, err)
		t.Cleanup(p.Stop)
		return p, "http://" + addr
	}
	holder := func() string {
		var lease coordinationv1.Lease
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "stakater-reloader-lock"}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	ready := func(url string) bool {
		resp, err := http.Get(url + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}

	leader, _ := replica("replica-a")
	testutil.Eventually(t, "replica-a leads", testutil.Cond(func() (bool, error) { return holder() == "replica-a", nil }))
	_, followerURL := replica("replica-b")
	testutil.Eventually(t, "the follower reports ready", testutil.Cond(func() (bool, error) { return ready(followerURL), nil }))
	if h := holder(); h != "replica-a" {
		t.Fatalf("lease held by %q", h)
	}
	for _, cm := range cms {
		testutil.Eventually(t, cm.Name+" recorded", testutil.Cond(func() (bool, error) {
			var d appsv1.Deployment
			if err := cl.Get(ctx, client.ObjectKeyFromObject(cm), &d); err != nil {
				return false, err
			}
			return records.Recorded(ctx, cl, &d)
		}))
	}

	seen := watchTemplates(t, ctx, cluster.Config, ns)
	for round := 1; round <= rounds; round++ {
		for _, cm := range cms {
			cm.Data["round"] = strconv.Itoa(round)
			testutil.Must(t, cl.Update(ctx, cm))
		}
		if round == killAfter {
			leader.Kill()
			t.Logf("killed replica-a after round %d", round)
		}
		time.Sleep(400 * time.Millisecond)
	}
	testutil.Eventually(t, "replica-b leads", testutil.Cond(func() (bool, error) { return holder() == "replica-b", nil }))

	envName := func(cm *corev1.ConfigMap) string {
		return reload.EnvVarName(source.ID{Kind: source.ConfigMap, Name: cm.Name})
	}
	testutil.Eventually(t, "every Deployment on its ConfigMap's last content", testutil.Cond(func() (bool, error) {
		for _, cm := range cms {
			if last := seen.last(cm.Name, envName(cm)); last != hash.ConfigMap(cm) {
				return false, nil
			}
		}
		return true, nil
	}))
	settled(t, "replica-b", followerURL) // room for a late duplicate
	for _, cm := range cms {
		values := seen.values(cm.Name, envName(cm))
		distinct := map[string]bool{}
		for _, v := range values {
			distinct[v] = true
		}
		t.Logf("%s: %d template changes over %d rounds", cm.Name, len(values), rounds)
		if len(values) != len(distinct) || len(values) > rounds {
			t.Errorf("%s: %d template changes carrying %d distinct contents over %d rounds: %v", cm.Name, len(values), len(distinct), rounds, values)
		}
	}
}

// templateLog records, per Deployment, the value of an env var at each pod-template change.
type templateLog struct {
	mu      sync.Mutex
	current map[string]string
	changes map[string][]templateChange
}

// templateChange is a pod template as the Deployment with UID uid got it.
type templateChange struct {
	uid types.UID
	tpl string
}

func (l *templateLog) values(name, env string) []string { return l.valuesOf(name, "", env) }

// valuesOf is values for the Deployment of one UID; "" means any.
func (l *templateLog) valuesOf(name string, uid types.UID, env string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, c := range l.changes[name] {
		if uid != "" && c.uid != uid {
			continue
		}
		var tpl corev1.PodTemplateSpec
		_ = json.Unmarshal([]byte(c.tpl), &tpl)
		for _, e := range tpl.Spec.Containers[0].Env {
			if e.Name == env {
				out = append(out, e.Value)
			}
		}
	}
	return out
}

func (l *templateLog) last(name, env string) string {
	v := l.values(name, env)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func watchTemplates(t *testing.T, ctx context.Context, cfg *rest.Config, ns string) *templateLog {
	t.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{})
	testutil.Must(t, err)
	l := &templateLog{current: map[string]string{}, changes: map[string][]templateChange{}}
	// Every template counts, in order: one missed while the watch was down fails the test.
	follower.Start(t, wc, &appsv1.DeploymentList{}, follower.Config{Gaps: follower.GapNone}, func(_ watch.EventType, o client.Object) {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			return
		}
		b, _ := json.Marshal(d.Spec.Template)
		l.mu.Lock()
		if prev, ok := l.current[d.Name]; ok && prev != string(b) {
			l.changes[d.Name] = append(l.changes[d.Name], templateChange{uid: d.UID, tpl: string(b)})
		}
		l.current[d.Name] = string(b)
		l.mu.Unlock()
	}, client.InNamespace(ns))
	return l
}
