// Package testenv starts a real Kubernetes control plane on this machine, from binaries the
// project builds itself (hack/kube-binaries.sh): etcd and kube-apiserver for integration
// tests; with kube-controller-manager, kube-scheduler and kwok fake nodes when pods must
// really roll. The product's tests use it, and so do the demo, the load tests and the
// benchmarks of the tools module (tools/), through its replace of this module.
package testenv

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// kwokNodeAnnotation marks the nodes kwok manages.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// Options configure a local cluster.
type Options struct {
	// BinDir holds the binaries; empty means BinDir().
	BinDir string
	// Rollouts also starts kube-controller-manager, kube-scheduler and kwok, so that
	// workloads create pods that go Running on fake nodes.
	Rollouts bool
	// Nodes is the number of fake nodes with Rollouts; default 1.
	Nodes int
	// APIServerFlags are extra kube-apiserver flags, e.g. an audit log.
	APIServerFlags map[string]string
	// CRDDirectoryPaths are installed before Start returns.
	CRDDirectoryPaths []string
}

// Cluster is a running local control plane.
type Cluster struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for other processes.
	Kubeconfig string
	// Dir holds the kubeconfig and the logs of the processes started besides the API server.
	Dir string

	env   *envtest.Environment
	procs []*exec.Cmd
}

// Start starts a cluster; Stop it when done.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "reloader-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, env: &envtest.Environment{
		BinaryAssetsDirectory:    binDir,
		CRDDirectoryPaths:        opts.CRDDirectoryPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: startTimeout(os.Getenv),
	}}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	apiServer := c.env.ControlPlane.GetAPIServer()
	// A directory of our own keeps the serving certificate and the client CA across
	// RestartAPIServer: clients keep trusting the server, and users stay valid.
	apiServer.CertDir = filepath.Join(dir, "kube-apiserver")
	if err := os.Mkdir(apiServer.CertDir, 0o700); err != nil {
		return nil, err
	}
	args := apiServer.Configure()
	// Open watches end at once on SIGTERM, rather than holding the shutdown (Stop, and
	// RestartAPIServer) past envtest's 20 s stop timeout.
	args.Set("shutdown-watch-termination-grace-period", "1s")
	for k, v := range opts.APIServerFlags {
		args.Set(k, v)
	}
	if c.Config, err = c.env.Start(); err != nil {
		return nil, fmt.Errorf("start etcd and kube-apiserver from %s: %w", binDir, err)
	}
	admin, err := c.env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	if !opts.Rollouts {
		return c, nil
	}

	k := "--kubeconfig=" + c.Kubeconfig
	if err := c.spawn(binDir, "kube-controller-manager", k, "--controllers=*,-serviceaccount-token,-nodeipam",
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0"); err != nil {
		return nil, err
	}
	if err := c.spawn(binDir, "kube-scheduler", k, "--leader-elect=false", "--secure-port=0"); err != nil {
		return nil, err
	}
	if err := c.spawn(binDir, "kwok", k, "--config="+filepath.Join(binDir, "kwok-stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector="+kwokNodeAnnotation+"=fake",
		"--node-ip=10.0.0.1", "--cidr=10.0.0.1/24", "--server-address=127.0.0.1:0"); err != nil {
		return nil, err
	}
	if err := c.addNodes(ctx, max(opts.Nodes, 1)); err != nil {
		return nil, err
	}
	return c, nil
}

// spawn starts a binary in its own process group, logging to Dir/<name>.log.
func (c *Cluster) spawn(binDir, name string, args ...string) error {
	logFile, err := os.Create(filepath.Join(c.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	return nil
}

// addNodes creates fake nodes for kwok and waits until they are Ready.
func (c *Cluster) addNodes(ctx context.Context, n int) error {
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return err
	}
	for i := range n {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("kwok-node-%d", i),
				Annotations: map[string]string{kwokNodeAnnotation: "fake"},
				Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": fmt.Sprintf("kwok-node-%d", i)},
			},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("1000"),
			}},
		}
		if err := cl.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", node.Name, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var nodes corev1.NodeList
		if err := cl.List(ctx, &nodes); err != nil {
			return false, nil
		}
		ready := 0
		for _, node := range nodes.Items {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n, nil
	})
	if err != nil {
		return fmt.Errorf("fake nodes not Ready (see %s/kwok.log): %w", c.Dir, err)
	}
	return nil
}

// RestartAPIServer stops kube-apiserver (SIGTERM, as a rolling upgrade does) and starts it
// again on the same address with the same certificates and etcd: every watch breaks, and
// clients reconnect. While it is down, a write straight to etcd (as another API server of an
// HA control plane would make) moves etcd's revision past every resourceVersion a client
// holds, so the new server's watch cache starts after them: no watch can resume (410 Gone),
// every client lists again. It returns once the new process serves /healthz.
func (c *Cluster) RestartAPIServer() error {
	s := c.env.ControlPlane.APIServer
	if err := s.Stop(); err != nil {
		return fmt.Errorf("stop kube-apiserver: %w", err)
	}
	if err := c.writeEtcd("/reloader-test/restarted", time.Now().String()); err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("start kube-apiserver again: %w", err)
	}
	return nil
}

// writeEtcd puts a key outside the API server's prefix, through etcd's JSON gateway.
func (c *Cluster) writeEtcd(key, value string) error {
	body, _ := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString([]byte(value)),
	})
	u := *c.env.ControlPlane.Etcd.URL
	u.Path = "/v3/kv/put"
	resp, err := http.Post(u.String(), "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("write to etcd: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("write to etcd: %s: %s", resp.Status, msg)
	}
	return nil
}

// AddUser authenticates a new user by client certificate; with no groups it may do only what
// RBAC grants it. It returns a config for the user and the path of a kubeconfig file for it.
func (c *Cluster) AddUser(name string, groups ...string) (*rest.Config, string, error) {
	u, err := c.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, "", fmt.Errorf("add user %s: %w", name, err)
	}
	kubeconfig, err := u.KubeConfig()
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(c.Dir, "kubeconfig-"+name)
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, "", err
	}
	return u.Config(), path, nil
}

// EnsureNamespace creates a namespace with the default ServiceAccount that pods need.
func (c *Cluster) EnsureNamespace(ctx context.Context, cl client.Client, name string) error {
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}},
	} {
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// Stop ends every process of the cluster and removes its files.
func (c *Cluster) Stop() error {
	var errs []error
	for _, p := range c.procs {
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
	}
	for _, p := range c.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Dir != "" && os.Getenv("RELOADER_KEEP_CLUSTER_DIR") == "" {
		errs = append(errs, os.RemoveAll(c.Dir))
	}
	return errors.Join(errs...)
}

// BinDir returns the directory of the control-plane binaries: $RELOADER_KUBE_BIN_DIR, or the
// output of hack/kube-binaries.sh, which builds them on first use and is a no-op after.
func BinDir() (string, error) {
	if d := os.Getenv("RELOADER_KUBE_BIN_DIR"); d != "" {
		return d, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "kube-binaries.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/kube-binaries.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// moduleRoot finds the directory of this project's go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "kube-binaries.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("set RELOADER_KUBE_BIN_DIR, or run from inside the reloader source tree")
		}
		dir = parent
	}
}

// startTimeout is how long etcd and kube-apiserver each get to start: envtest's
// KUBEBUILDER_CONTROLPLANE_START_TIMEOUT when set, else 90 s. envtest's own 20 s was too short on
// 2 cores running make test's five groups and three busy loops: each of its five attempts
// started over from scratch and none finished, failing every test of the package (seen in the
// loaded runs of make test). One longer wait does the work once.
func startTimeout(getenv func(string) string) time.Duration {
	if getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") != "" {
		return 0 // envtest reads it
	}
	return 90 * time.Second
}
