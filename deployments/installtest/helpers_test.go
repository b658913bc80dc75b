package installtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testutil"
)

func ensureNamespace(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// create creates objs as the admin and returns them.
func create(t *testing.T, ctx context.Context, objs ...client.Object) []client.Object {
	t.Helper()
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", describe(o), err)
		}
	}
	return objs
}

func describe(o client.Object) string {
	kind := fmt.Sprintf("%T", o)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	return fmt.Sprintf("%s %s/%s", kind, o.GetNamespace(), o.GetName())
}

// eventually is testutil.Eventually with a fast failure: an error from abort (the process
// under test died) fails the test at once.
func eventually(t *testing.T, ctx context.Context, what string, abort, check func() error) {
	t.Helper()
	testutil.Eventually(t, what, func() error {
		if err := abort(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: %v (last: %v)", what, err, check())
		}
		return check()
	})
}
