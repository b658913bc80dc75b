//go:build tools

// Package deployments holds what installs reloader: the image builder, the Helm chart, the
// Kustomize base and their tests. It is a module of its own so that Helm's and
// go-containerregistry's dependencies never enter the controller's go.mod.
package deployments

// Pinned here so that `go mod tidy` keeps them while the code that uses them is written.
import (
	_ "github.com/google/go-containerregistry/pkg/v1/mutate"
	_ "github.com/reloader-operator/reloader/internal/options"
	_ "helm.sh/helm/v3/pkg/action"
	_ "helm.sh/helm/v3/pkg/lint"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
