package workload

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// What keeping every status in the cache costs (--waves-min-workloads above 0: the waves'
// gate reads the members' statuses), as heap held per slim Deployment by 1,000 of them.
func TestKeptStatusHeapPerObject(t *testing.T) {
	const n = 1000
	b := appliedDeployment()
	held := func(keep func(client.Object) bool) uint64 {
		return testutil.RetainedBy(func() any {
			out := make([]client.Object, n)
			for i := range out {
				out[i] = transform(t, Deployment(), keep, decode[appsv1.Deployment](t, b))
			}
			return out
		}) / n
	}
	dropped, kept := held(nil), held(func(client.Object) bool { return true })
	t.Logf("heap held per slim Deployment: %d bytes with its status dropped, %d kept", dropped, kept)
	if kept*10 > dropped*13 {
		t.Errorf("a kept status costs %d bytes, more than 30%% of a slim Deployment (%d)", kept-dropped, dropped)
	}
}
