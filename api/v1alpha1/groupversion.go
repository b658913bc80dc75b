// Package v1alpha1 holds reloader's own API: ReloaderConfig, reload rules declared beside the
// workloads they reload, for teams that can't annotate what they deploy.
//
// +kubebuilder:object:generate=true
// +groupName=reloader.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of ReloaderConfig.
var GroupVersion = schema.GroupVersion{Group: "reloader.dev", Version: "v1alpha1"}

// AddToScheme registers the types of this API.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ReloaderConfig{}, &ReloaderConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
