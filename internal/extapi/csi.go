package extapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true

// SecretProviderClassPodStatus is the Secrets Store CSI driver's record of one pod's mount of
// a SecretProviderClass: which objects, at which versions.
type SecretProviderClassPodStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            SecretProviderClassPodStatusStatus `json:"status,omitempty"`
}

// SecretProviderClassPodStatusStatus is the status of one pod's mount.
type SecretProviderClassPodStatusStatus struct {
	PodName                 string                      `json:"podName,omitempty"`
	SecretProviderClassName string                      `json:"secretProviderClassName,omitempty"`
	Mounted                 bool                        `json:"mounted,omitempty"`
	Objects                 []SecretProviderClassObject `json:"objects,omitempty"`
}

// SecretProviderClassObject is one mounted object and its version at the provider.
type SecretProviderClassObject struct {
	ID      string `json:"id,omitempty"`
	Version string `json:"version,omitempty"`
}

// +kubebuilder:object:root=true

// SecretProviderClassPodStatusList is a list of SecretProviderClassPodStatuses.
type SecretProviderClassPodStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecretProviderClassPodStatus `json:"items"`
}
