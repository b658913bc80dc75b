package installtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// eventually polls check until it returns nil, and fails the test with its last error; an
// error from abort fails it at once.
func eventually(t *testing.T, ctx context.Context, what string, abort, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
		if err := abort(); err != nil {
			return false, err
		}
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}
