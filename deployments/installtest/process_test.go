package installtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/reloader-operator/reloader/internal/testenv/proc"
	"github.com/reloader-operator/reloader/internal/testutil"
)

// reloaderProcess is the reloader binary running as the chart's container would.
type reloaderProcess struct {
	name   string
	url    string // the metrics address, http://host:port
	cmd    *exec.Cmd
	out    proc.Output
	exited chan struct{}
	once   sync.Once
}

// startReloader runs the binary with exactly argv and env (nothing of the test's own
// environment), plus --kubeconfig, and a free --metrics-addr in place of the chart's so that
// several replicas fit on one machine. Its output is logged when the test fails.
func startReloader(t *testing.T, name string, argv, env []string, kubeconfig string) *reloaderProcess {
	t.Helper()
	addr, err := proc.FreeAddr()
	testutil.Must(t, err)
	args := append(withMetricsAddr(argv, addr), "--kubeconfig="+kubeconfig)
	p := &reloaderProcess{name: name, url: "http://" + addr, exited: make(chan struct{})}
	p.cmd = exec.Command(reloaderBin, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start reloader %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Logf("%s: reloader %s\n  env: %s", name, strings.Join(args, " "), strings.Join(env, " "))
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("--- log of reloader %s (%s) ---\n%s", name, p.cmd.ProcessState, p.out.String())
		}
	})
	return p
}

// withMetricsAddr replaces the value of --metrics-addr, in either of its forms, or adds the
// flag when the chart leaves it at its default.
func withMetricsAddr(argv []string, addr string) []string {
	out := make([]string, 0, len(argv)+1)
	replaced := false
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		switch {
		case strings.HasPrefix(a, "--metrics-addr="):
			a, replaced = "--metrics-addr="+addr, true
		case a == "--metrics-addr" && i+1 < len(argv):
			a, replaced = "--metrics-addr="+addr, true
			i++
		}
		out = append(out, a)
	}
	if !replaced {
		out = append(out, "--metrics-addr="+addr)
	}
	return out
}

// stop sends SIGTERM to the process group, then SIGKILL if it has not exited in 10 s.
func (p *reloaderProcess) stop() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	})
}

// waitReady waits for /ready to answer 200; an exit of the process, or an error from abort,
// ends the wait at once.
func (p *reloaderProcess) waitReady(ctx context.Context, abort func() error) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("reloader %s exited: %s", p.name, p.cmd.ProcessState)
		default:
		}
		if err := abort(); err != nil {
			return false, err
		}
		resp, err := http.Get(p.url + "/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("reloader %s not ready: %w", p.name, err)
	}
	return nil
}

// metrics returns the text of /metrics.
func (p *reloaderProcess) metrics() (string, error) {
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return string(b), err
}
