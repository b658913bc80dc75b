package installtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/extapi"
	"github.com/reloader-operator/reloader/internal/testenv"
)

// One control plane and one reloader build serve the whole package; they are started by the
// first test that needs them, so that the pure-logic tests run without them.
var (
	cluster     *testenv.Cluster
	admin       client.Client
	reloaderBin string
	auditLog    string
	repoRoot    string
	chartDir    string

	setUpOnce sync.Once
	setUpErr  error
	workDir   string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	chartDir = filepath.Join(repoRoot, "deployments", "chart", "reloader")
	code := m.Run()
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "installtest: stop cluster:", err)
		}
	}
	if workDir != "" {
		_ = os.RemoveAll(workDir)
	}
	return code
}

// needCluster starts the control plane and builds reloader, once.
func needCluster(t *testing.T) {
	t.Helper()
	setUpOnce.Do(func() { setUpErr = setUp() })
	if setUpErr != nil {
		t.Fatal(setUpErr)
	}
}

func setUp() error {
	dir, err := os.MkdirTemp("", "reloader-installtest-")
	workDir = dir
	if err != nil {
		return err
	}

	// The build and the control plane's start-up overlap: both take seconds.
	reloaderBin = filepath.Join(dir, "reloader")
	built := make(chan error, 1)
	go func() {
		cmd := exec.Command("go", "build", "-o", reloaderBin, "./cmd/reloader")
		cmd.Dir = repoRoot // the controller is a module of its own
		if out, err := cmd.CombinedOutput(); err != nil {
			built <- fmt.Errorf("go build ./cmd/reloader: %w\n%s", err, out)
			return
		}
		built <- nil
	}()

	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	auditLog = filepath.Join(dir, "audit.log")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, err = testenv.Start(ctx, testenv.Options{
		APIServerFlags: map[string]string{
			"audit-policy-file": policy,
			"audit-log-path":    auditLog,
			"audit-log-format":  "json",
		},
		CRDDirectoryPaths: []string{filepath.Join(repoRoot, "test", "crds")},
	})
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := extapi.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if admin, err = client.New(cluster.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	return <-built
}
