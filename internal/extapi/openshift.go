package extapi

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true

// DeploymentConfig is an apps.openshift.io/v1 DeploymentConfig, reduced to its pod template.
type DeploymentConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DeploymentConfigSpec `json:"spec,omitempty"`
}

// DeploymentConfigSpec is the part of a DeploymentConfig's spec reloader uses.
type DeploymentConfigSpec struct {
	Template *corev1.PodTemplateSpec `json:"template,omitempty"`
}

// +kubebuilder:object:root=true

// DeploymentConfigList is a list of DeploymentConfigs.
type DeploymentConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeploymentConfig `json:"items"`
}
