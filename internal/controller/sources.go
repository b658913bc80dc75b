package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/hash"
	"github.com/reloader-operator/reloader/internal/source"
)

// cachedHashAnnotation carries a source's content hash inside reloader's cache, where the
// content itself is dropped. It never reaches the API server.
const cachedHashAnnotation = "reloader.dev/cached-content-hash"

// SourceType is how the controller reads one kind of source.
type SourceType struct {
	Kind      source.Kind
	NewObject func() client.Object
	NewList   func() client.ObjectList
	// Hash computes the content hash of a full object.
	Hash func(client.Object) string
	// Field narrows the watch server-side.
	Field fields.Selector
}

// ConfigMaps and Secrets are the built-in source types.
var (
	ConfigMaps = SourceType{
		Kind:      source.ConfigMap,
		NewObject: func() client.Object { return &corev1.ConfigMap{} },
		NewList:   func() client.ObjectList { return &corev1.ConfigMapList{} },
		Hash:      func(o client.Object) string { return hash.ConfigMap(o.(*corev1.ConfigMap)) },
	}
	Secrets = SourceType{
		Kind:      source.Secret,
		NewObject: func() client.Object { return &corev1.Secret{} },
		NewList:   func() client.ObjectList { return &corev1.SecretList{} },
		Hash:      func(o client.Object) string { return hash.Secret(o.(*corev1.Secret)) },
		// Service account tokens are rotated by Kubernetes and are never user config.
		Field: fields.OneTermNotEqualSelector("type", string(corev1.SecretTypeServiceAccountToken)),
	}
)

// Transform replaces a source's content by its hash before the object enters the cache, so
// that reloader's memory grows with the number of objects, not with their bytes.
//
// The informer may hand the same object to Transform more than once (objects of the initial
// list are); the second pass must keep the hash of the content, not hash the emptied object.
func (t SourceType) Transform(obj any) (any, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return obj, nil
	}
	if _, done := o.GetAnnotations()[cachedHashAnnotation]; done {
		return o, nil
	}
	h := t.Hash(o)
	switch v := o.(type) {
	case *corev1.ConfigMap:
		v.Data, v.BinaryData = nil, nil
	case *corev1.Secret:
		v.Data, v.StringData = nil, nil
	}
	o.SetManagedFields(nil)
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[cachedHashAnnotation] = h
	o.SetAnnotations(ann)
	return o, nil
}

// contentHash reads a source's hash from a cached object, or computes it from a full one.
func (t SourceType) contentHash(o client.Object) string {
	if h, ok := o.GetAnnotations()[cachedHashAnnotation]; ok {
		return h
	}
	return t.Hash(o)
}
