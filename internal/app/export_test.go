package app

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Discover is discover for the tests: it reports whether obj's kind is served.
func Discover(ctx context.Context, cfg *rest.Config, gv schema.GroupVersion, asked bool, backoff wait.Backoff, logger logr.Logger, obj client.Object) (bool, error) {
	scheme, err := NewScheme()
	if err != nil {
		return false, err
	}
	s, err := discover(ctx, cfg, scheme, []optionalAPI{{gv: gv, asked: asked}}, backoff, logger)
	if err != nil {
		return false, err
	}
	return s.has(obj), nil
}

// CheckJobRights is checkJobRights for the tests.
var CheckJobRights = checkJobRights
