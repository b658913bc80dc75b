package extapi

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true

// Rollout is an argoproj.io/v1alpha1 Rollout, reduced to its pod template and restart time.
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              RolloutSpec `json:"spec,omitempty"`
}

// RolloutSpec is the part of a Rollout's spec reloader uses.
type RolloutSpec struct {
	Template corev1.PodTemplateSpec `json:"template,omitempty"`
	// WorkloadRef points to a Deployment whose pod template the Rollout runs instead of its own.
	WorkloadRef *WorkloadRef `json:"workloadRef,omitempty"`
	// RestartAt asks Argo Rollouts to restart every pod created before it.
	RestartAt *metav1.Time `json:"restartAt,omitempty"`
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
