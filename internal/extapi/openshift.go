package extapi

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true

// DeploymentConfig is an apps.openshift.io/v1 DeploymentConfig, reduced to its pod template
// and the status fields that tell how a rollout is going.
type DeploymentConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DeploymentConfigSpec   `json:"spec,omitempty"`
	Status            DeploymentConfigStatus `json:"status,omitempty"`
}

// DeploymentConfigSpec is the part of a DeploymentConfig's spec reloader uses.
type DeploymentConfigSpec struct {
	Template *corev1.PodTemplateSpec `json:"template,omitempty"`
	Replicas int32                   `json:"replicas,omitempty"`
	Paused   bool                    `json:"paused,omitempty"`
}

// DeploymentConfigStatus is the part of a DeploymentConfig's status that tells how a
// rollout is going.
type DeploymentConfigStatus struct {
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
	Replicas           int32       `json:"replicas,omitempty"`
	UpdatedReplicas    int32       `json:"updatedReplicas,omitempty"`
	ReadyReplicas      int32       `json:"readyReplicas,omitempty"`
	AvailableReplicas  int32       `json:"availableReplicas,omitempty"`
	Conditions         []Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true

// DeploymentConfigList is a list of DeploymentConfigs.
type DeploymentConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeploymentConfig `json:"items"`
}
