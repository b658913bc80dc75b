package workload

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/extapi"
)

type progressCase struct {
	name  string
	obj   client.Object
	state RolloutState
	// why must appear in Progress.Why.
	why string
}

func checkProgress(t *testing.T, k Kind, gen int64, tests []progressCase) {
	t.Helper()
	p, ok := k.(Progressing)
	if !ok {
		t.Fatalf("%s does not implement Progressing", k.Name())
	}
	for _, tt := range tests {
		got := p.Progress(tt.obj, gen)
		if got.State != tt.state || !strings.Contains(got.Why, tt.why) {
			t.Errorf("%s %s: got %v %q, want %v with %q", k.Name(), tt.name, got.State, got.Why, tt.state, tt.why)
		}
	}
}

func TestDeploymentProgress(t *testing.T) {
	dep := func(spec func(*appsv1.DeploymentSpec), status appsv1.DeploymentStatus) *appsv1.Deployment {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}, Status: status}
		if spec != nil {
			spec(&d.Spec)
		}
		return d
	}
	done := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	exceeded := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 0,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: "False",
			Reason: ReasonProgressDeadlineExceeded, Message: `ReplicaSet "web-2" has timed out progressing.`}}}
	checkProgress(t, Deployment(), 2, []progressCase{
		{"not observed", dep(nil, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3, ReadyReplicas: 3}),
			RolloutProgressing, "observe generation 2"},
		{"later generation observed and done", dep(nil, appsv1.DeploymentStatus{ObservedGeneration: 5, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}),
			RolloutComplete, "3 of 3 replicas updated"},
		{"done", dep(nil, done), RolloutComplete, "3 of 3 replicas updated, 3 ready, 3 available"},
		{"updating", dep(nil, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3}),
			RolloutProgressing, "1 of 3 replicas updated"},
		{"old pods left", dep(nil, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}),
			RolloutProgressing, "1 old pending termination"},
		{"not yet available", dep(nil, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 2}),
			RolloutProgressing, "2 available"},
		{"deadline exceeded", dep(nil, exceeded), RolloutStalled, "1 of 3 replicas updated, 0 ready, 0 available, 3 old pending termination; ProgressDeadlineExceeded: ReplicaSet"},
		{"paused", dep(func(s *appsv1.DeploymentSpec) { s.Paused = true }, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3}),
			RolloutPaused, "paused"},
		{"nil replicas means 1", dep(func(s *appsv1.DeploymentSpec) { s.Replicas = nil },
			appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}),
			RolloutComplete, "1 of 1"},
		{"scaled to zero", dep(func(s *appsv1.DeploymentSpec) { s.Replicas = ptr.To[int32](0) }, appsv1.DeploymentStatus{ObservedGeneration: 2}),
			RolloutComplete, "0 of 0"},
	})
	if got := Deployment().(Progressing).Progress(dep(nil, done), 2).Deadline; got != 10*time.Minute {
		t.Errorf("default deadline %v, want 10m", got)
	}
	own := dep(func(s *appsv1.DeploymentSpec) { s.ProgressDeadlineSeconds = ptr.To[int32](30) }, done)
	if got := Deployment().(Progressing).Progress(own, 2).Deadline; got != 30*time.Second {
		t.Errorf("deadline %v, want progressDeadlineSeconds 30s", got)
	}
}

func TestStatefulSetProgress(t *testing.T) {
	sts := func(strategy appsv1.StatefulSetUpdateStrategy, status appsv1.StatefulSetStatus) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), UpdateStrategy: strategy}, Status: status}
	}
	rolling := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	partitioned := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}}
	status := func(updated, ready int32, current, update string) appsv1.StatefulSetStatus {
		return appsv1.StatefulSetStatus{ObservedGeneration: 4, Replicas: 3, UpdatedReplicas: updated, ReadyReplicas: ready,
			AvailableReplicas: ready, CurrentRevision: current, UpdateRevision: update}
	}
	checkProgress(t, StatefulSet(), 4, []progressCase{
		{"not observed", sts(rolling, appsv1.StatefulSetStatus{ObservedGeneration: 3}), RolloutProgressing, "observe generation 4"},
		{"done", sts(rolling, status(3, 3, "web-b", "web-b")), RolloutComplete, "3 of 3 replicas updated"},
		{"updating", sts(rolling, status(1, 2, "web-a", "web-b")), RolloutProgressing, "1 of 3 replicas updated, 2 ready"},
		{"counts done, revision not current", sts(rolling, status(3, 3, "web-a", "web-b")), RolloutProgressing, "revision web-b not yet current"},
		{"partition reached", sts(partitioned, status(1, 3, "web-a", "web-b")), RolloutComplete, "1 of 1 replicas above partition 2"},
		{"partition not reached", sts(partitioned, status(0, 3, "web-a", "web-b")), RolloutProgressing, "0 of 1 replicas above partition 2"},
		{"on delete", sts(appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}, status(0, 3, "web-a", "web-b")),
			RolloutUntracked, "OnDelete"},
	})
}

func TestDaemonSetProgress(t *testing.T) {
	ds := func(strategy appsv1.DaemonSetUpdateStrategyType, status appsv1.DaemonSetStatus) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: strategy}}, Status: status}
	}
	status := func(updated, available int32) appsv1.DaemonSetStatus {
		return appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 5, UpdatedNumberScheduled: updated,
			NumberReady: available, NumberAvailable: available}
	}
	checkProgress(t, DaemonSet(), 2, []progressCase{
		{"not observed", ds(appsv1.RollingUpdateDaemonSetStrategyType, appsv1.DaemonSetStatus{ObservedGeneration: 1}), RolloutProgressing, "observe generation 2"},
		{"done", ds(appsv1.RollingUpdateDaemonSetStrategyType, status(5, 5)), RolloutComplete, "5 of 5 replicas updated"},
		{"updating", ds(appsv1.RollingUpdateDaemonSetStrategyType, status(2, 4)), RolloutProgressing, "2 of 5 replicas updated, 4 ready, 4 available"},
		{"on delete", ds(appsv1.OnDeleteDaemonSetStrategyType, status(0, 5)), RolloutUntracked, "OnDelete"},
	})
}

func TestArgoRolloutProgress(t *testing.T) {
	ro := func(spec func(*extapi.RolloutSpec), status extapi.RolloutStatus) *extapi.Rollout {
		r := &extapi.Rollout{Spec: extapi.RolloutSpec{Replicas: ptr.To[int32](2)}, Status: status}
		if spec != nil {
			spec(&r.Spec)
		}
		return r
	}
	healthy := extapi.RolloutStatus{ObservedGeneration: "7", Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
		Phase: "Healthy", CurrentPodHash: "abc", StableRS: "abc"}
	canary := healthy
	canary.StableRS = "old"
	aborted := healthy
	aborted.Abort, aborted.Phase, aborted.Message = true, "Degraded", "RolloutAborted: metric failed"
	deadline := extapi.RolloutStatus{ObservedGeneration: "7", Replicas: 3, UpdatedReplicas: 1,
		Conditions: []extapi.Condition{{Type: "Progressing", Status: "False", Reason: ReasonProgressDeadlineExceeded, Message: "timed out"}}}
	checkProgress(t, Rollout(), 7, []progressCase{
		{"not observed", ro(nil, extapi.RolloutStatus{ObservedGeneration: "6"}), RolloutProgressing, "observe generation 7"},
		{"no status yet", ro(nil, extapi.RolloutStatus{}), RolloutProgressing, "observed 0"},
		{"healthy", ro(nil, healthy), RolloutComplete, "2 of 2 replicas updated"},
		{"not promoted", ro(nil, canary), RolloutProgressing, "not yet promoted to stable"},
		{"aborted", ro(nil, aborted), RolloutStalled, "RolloutAborted: RolloutAborted: metric failed"},
		{"deadline exceeded", ro(nil, deadline), RolloutStalled, "1 of 2 replicas updated, 0 ready, 0 available, 2 old pending termination; ProgressDeadlineExceeded: timed out"},
		{"workloadRef", ro(func(s *extapi.RolloutSpec) { s.WorkloadRef = &extapi.WorkloadRef{Kind: "Deployment", Name: "base"} }, healthy),
			RolloutUntracked, "Deployment base"},
		{"paused step", ro(nil, extapi.RolloutStatus{ObservedGeneration: "7", Replicas: 3, UpdatedReplicas: 1, Phase: "Paused"}), RolloutPaused, "paused"},
	})
	own := ro(func(s *extapi.RolloutSpec) { s.ProgressDeadlineSeconds = ptr.To[int32](90) }, healthy)
	if got := Rollout().(Progressing).Progress(own, 7).Deadline; got != 90*time.Second {
		t.Errorf("deadline %v, want 90s", got)
	}
}

func TestDeploymentConfigProgress(t *testing.T) {
	dc := func(paused bool, status extapi.DeploymentConfigStatus) *extapi.DeploymentConfig {
		return &extapi.DeploymentConfig{Spec: extapi.DeploymentConfigSpec{Replicas: 2, Paused: paused}, Status: status}
	}
	checkProgress(t, DeploymentConfig(), 3, []progressCase{
		{"not observed", dc(false, extapi.DeploymentConfigStatus{ObservedGeneration: 2}), RolloutProgressing, "observe generation 3"},
		{"done", dc(false, extapi.DeploymentConfigStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}),
			RolloutComplete, "2 of 2"},
		{"updating", dc(false, extapi.DeploymentConfigStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2}),
			RolloutProgressing, "1 of 2 replicas updated"},
		{"deadline exceeded", dc(false, extapi.DeploymentConfigStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 0,
			Conditions: []extapi.Condition{{Type: "Progressing", Status: "False", Reason: ReasonProgressDeadlineExceeded, Message: "replication controller \"web-4\" has failed progressing"}}}),
			RolloutStalled, "ProgressDeadlineExceeded: replication controller"},
		{"paused", dc(true, extapi.DeploymentConfigStatus{ObservedGeneration: 3, Replicas: 2}), RolloutPaused, "paused"},
	})
	if got := DeploymentConfig().(Progressing).Progress(dc(false, extapi.DeploymentConfigStatus{}), 3).Deadline; got != 0 {
		t.Errorf("deadline %v, want 0 (the follower's)", got)
	}
}

func TestJobsHaveNoRollout(t *testing.T) {
	for _, k := range []Kind{Job(), CronJob()} {
		if _, ok := k.(Progressing); ok {
			t.Errorf("%s implements Progressing; it has no rollout to follow", k.Name())
		}
	}
}
