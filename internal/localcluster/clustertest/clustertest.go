// Package clustertest runs a package's tests against a local control plane. It is apart from
// testutil so that unit tests which use testutil do not link envtest.
package clustertest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/reloader-operator/reloader/internal/localcluster"
)

// Main is the body of a TestMain against a real API server: it starts a local
// control plane, lets setup make the package's clients of it, runs the tests, stops the
// control plane and exits with the tests' code.
func Main(m *testing.M, opts localcluster.Options, setup func(*localcluster.Cluster) error) {
	cluster, err := localcluster.Start(context.Background(), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start control plane:", err)
		os.Exit(1)
	}
	if setup != nil {
		if err := setup(cluster); err != nil {
			fmt.Fprintln(os.Stderr, err)
			_ = cluster.Stop()
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = cluster.Stop()
	os.Exit(code)
}
