package installtest

import (
	"slices"
	"testing"
)

func TestLostLabels(t *testing.T) {
	upstream := map[string]string{"app": "reloader-reloader", "release": "reloader", "helm.sh/chart": "reloader-2.2.16", "provider": "stakater"}
	for _, tc := range []struct {
		name string
		got  map[string]string
		want []string
	}{
		{"kept, one added, chart version changed", map[string]string{"app": "reloader-reloader", "release": "reloader", "helm.sh/chart": "reloader-0.2.0", "provider": "stakater", "extra": "x"}, nil},
		{"dropped", map[string]string{"app": "reloader-reloader", "release": "reloader", "helm.sh/chart": "reloader-2.2.16"}, []string{"provider=stakater dropped"}},
		{"changed", map[string]string{"app": "reloader", "release": "reloader", "helm.sh/chart": "reloader-2.2.16", "provider": "stakater"}, []string{"app=reloader-reloader changed to reloader"}},
	} {
		if got := lostLabels(upstream, tc.got); !slices.Equal(got, tc.want) {
			t.Errorf("%s: lostLabels = %q, want %q", tc.name, got, tc.want)
		}
	}
}
