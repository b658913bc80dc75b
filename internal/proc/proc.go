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
	"syscall"
)

// Start runs bin with KUBECONFIG set, each output line prefixed, in its own process group
// (killed with the parent). stop sends SIGTERM and waits for the exit.
func Start(bin string, args []string, kubeconfig, prefix string, out io.Writer) (stop func(), err error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			fmt.Fprintf(out, "%s%s\n", prefix, sc.Text())
		}
	}()
	return func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		pw.Close()
	}, nil
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
