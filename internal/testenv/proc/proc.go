// Package proc runs a reloader-compatible binary as a child process, as a user would: the
// demo, the end-to-end tests and the load tests all start reloaders through it.
package proc

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// Spec says how to run one process.
type Spec struct {
	Bin        string
	Args       []string
	Kubeconfig string
	// Env is added to this process's environment.
	Env []string
	// Prefix starts each output line written to Out.
	Prefix string
	Out    io.Writer
}

// Process is a running child.
type Process struct {
	cmd    *exec.Cmd
	pw     *io.PipeWriter
	copied chan struct{}
	once   sync.Once
}

// Run starts spec in its own process group, killed with the parent.
func Run(spec Spec) (*Process, error) {
	cmd := exec.Command(spec.Bin, spec.Args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+spec.Kubeconfig), spec.Env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Bin, err)
	}
	p := &Process{cmd: cmd, pw: pw, copied: make(chan struct{})}
	go func() {
		defer close(p.copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			fmt.Fprintf(spec.Out, "%s%s\n", spec.Prefix, sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits for the exit; ProcessState then tells how it went.
func (p *Process) Stop() { p.end(syscall.SIGTERM) }

// Terminate sends SIGTERM and returns at once; Stop then waits for the exit.
func (p *Process) Terminate() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM) }

// Kill ends the process at once, as a crash or a lost node would.
func (p *Process) Kill() { p.end(syscall.SIGKILL) }

// ProcessState is the exit state once Stop or Kill returned.
func (p *Process) ProcessState() *os.ProcessState { return p.cmd.ProcessState }

func (p *Process) end(sig syscall.Signal) {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
		_ = p.cmd.Wait()
		p.pw.Close()
		<-p.copied
	})
}

// Start runs bin with KUBECONFIG set, each output line prefixed. stop sends SIGTERM and waits.
func Start(bin string, args []string, kubeconfig, prefix string, out io.Writer) (stop func(), err error) {
	p, err := Run(Spec{Bin: bin, Args: args, Kubeconfig: kubeconfig, Prefix: prefix, Out: out})
	if err != nil {
		return nil, err
	}
	return p.Stop, nil
}

// FreeAddr returns a loopback address with a port free at the time of the call.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Build compiles the package at pkg (a path such as ../../../cmd/reloader) into dir and returns
// the binary's path; tests run reloader as users do, as a built binary.
func Build(pkg, dir string) (string, error) {
	bin := dir + "/" + lastElem(pkg)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

func lastElem(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}
