// Package extapi holds minimal typed views of the APIs reloader uses but Kubernetes does not
// ship: Argo Rollouts, OpenShift DeploymentConfigs and the Secrets Store CSI driver's pod
// status. Each view has only the fields reloader reads or writes, so the cache holds little
// and no heavy client library is pulled in. Writes are JSON merge patches computed between two
// views, which leave every other field of the object as it is.
//
// +kubebuilder:object:generate=true
package extapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The group versions of the views.
var (
	ArgoGroupVersion      = schema.GroupVersion{Group: "argoproj.io", Version: "v1alpha1"}
	OpenShiftGroupVersion = schema.GroupVersion{Group: "apps.openshift.io", Version: "v1"}
	CSIGroupVersion       = schema.GroupVersion{Group: "secrets-store.csi.x-k8s.io", Version: "v1"}
)

// AddToScheme registers every view.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(ArgoGroupVersion, &Rollout{}, &RolloutList{})
	s.AddKnownTypes(OpenShiftGroupVersion, &DeploymentConfig{}, &DeploymentConfigList{})
	s.AddKnownTypes(CSIGroupVersion, &SecretProviderClassPodStatus{}, &SecretProviderClassPodStatusList{})
	for _, gv := range []schema.GroupVersion{ArgoGroupVersion, OpenShiftGroupVersion, CSIGroupVersion} {
		metav1.AddToGroupVersion(s, gv)
	}
	return nil
}
