package extapi

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true

// Rollout is an argoproj.io/v1alpha1 Rollout, reduced to its pod template and restart time,
// and the status fields that tell how a rollout is going.
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              RolloutSpec   `json:"spec,omitempty"`
	Status            RolloutStatus `json:"status,omitempty"`
}

// RolloutSpec is the part of a Rollout's spec reloader uses.
type RolloutSpec struct {
	Template corev1.PodTemplateSpec `json:"template,omitempty"`
	// WorkloadRef points to a Deployment whose pod template the Rollout runs instead of its own.
	WorkloadRef *WorkloadRef `json:"workloadRef,omitempty"`
	// RestartAt asks Argo Rollouts to restart every pod created before it.
	RestartAt *metav1.Time `json:"restartAt,omitempty"`
	// Replicas is the number of pods wanted; nil means 1.
	Replicas *int32 `json:"replicas,omitempty"`
	// Paused holds the rollout back.
	Paused bool `json:"paused,omitempty"`
	// ProgressDeadlineSeconds is how long a rollout may make no progress; nil means 600.
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
}

// RolloutStatus is the part of a Rollout's status that tells how a rollout is going.
type RolloutStatus struct {
	// ObservedGeneration is a string in Argo Rollouts' API.
	ObservedGeneration string      `json:"observedGeneration,omitempty"`
	Replicas           int32       `json:"replicas,omitempty"`
	UpdatedReplicas    int32       `json:"updatedReplicas,omitempty"`
	ReadyReplicas      int32       `json:"readyReplicas,omitempty"`
	AvailableReplicas  int32       `json:"availableReplicas,omitempty"`
	Conditions         []Condition `json:"conditions,omitempty"`
	// Abort is set when the rollout was aborted and went back to the stable pods.
	Abort bool `json:"abort,omitempty"`
	// Phase is Progressing, Paused, Healthy or Degraded; Message says why.
	Phase   string `json:"phase,omitempty"`
	Message string `json:"message,omitempty"`
	// CurrentPodHash names the pods of the current template, StableRS those promoted stable.
	CurrentPodHash string `json:"currentPodHash,omitempty"`
	StableRS       string `json:"stableRS,omitempty"`
}

// Condition is a status condition of Argo Rollouts and DeploymentConfigs, reduced to what
// says how a rollout went.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// WorkloadRef names the workload that holds a Rollout's template.
type WorkloadRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name,omitempty"`
}

// +kubebuilder:object:root=true

// RolloutList is a list of Rollouts.
type RolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Rollout `json:"items"`
}
