package clientindex_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/clientindex"
	"github.com/reloader-operator/reloader/internal/testenv"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// TestListByIndex: a List by an indexed field returns the objects the index function gives
// that value, as a cache would; other field selectors still go to the API server.
func TestListByIndex(t *testing.T) {
	ctx := context.Background()
	cluster, err := testenv.Start(ctx, testenv.Options{})
	testutil.Must(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	direct, err := client.New(cluster.Config, client.Options{})
	testutil.Must(t, err)
	c := clientindex.New(direct)
	byTeam := func(o client.Object) []string {
		if team := o.GetLabels()["team"]; team != "" {
			return []string{team, "any"}
		}
		return nil
	}
	testutil.Must(t, c.IndexField(ctx, &corev1.ConfigMap{}, "by-team", byTeam))
	for i, team := range []string{"a", "b", "a", ""} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("cm-%d", i), Labels: map[string]string{"team": team}}}
		testutil.Must(t, c.Create(ctx, cm))
	}
	names := func(opts ...client.ListOption) []string {
		t.Helper()
		var list corev1.ConfigMapList
		testutil.Must(t, c.List(ctx, &list, append(opts, client.InNamespace("default"))...))
		var out []string
		for _, cm := range list.Items {
			if cm.Name != "kube-root-ca.crt" {
				out = append(out, cm.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range []struct {
		opts []client.ListOption
		want []string
	}{
		{[]client.ListOption{client.MatchingFields{"by-team": "a"}}, []string{"cm-0", "cm-2"}},
		{[]client.ListOption{client.MatchingFields{"by-team": "any"}}, []string{"cm-0", "cm-1", "cm-2"}},
		{[]client.ListOption{client.MatchingFields{"by-team": "c"}}, nil},
		{[]client.ListOption{client.MatchingFields{"by-team": "a", "metadata.name": "cm-2"}}, []string{"cm-2"}},
		{[]client.ListOption{client.MatchingFields{"metadata.name": "cm-1"}}, []string{"cm-1"}},
	} {
		if got := names(tt.opts...); !slices.Equal(got, tt.want) {
			t.Errorf("%v: %v, want %v", tt.opts, got, tt.want)
		}
	}
}
