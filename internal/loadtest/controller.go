package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/reloader-operator/reloader/internal/proc"
)

// Side is one build under test.
type Side struct {
	// Name is "old" or "new".
	Name string
	Bin  string
	Args []string
}

// Controller runs one side's binary and measures its process.
type Controller struct {
	Side       Side
	Kubeconfig string
	// MetricsAddrFlag is the flag that sets the binary's metrics address; empty when the binary
	// has none (it then listens on :9090).
	MetricsAddrFlag string
	Out             io.Writer

	p          *proc.Process
	metricsURL string
	// CPUSeconds adds up every run of the process; PeakRSS is the highest of any.
	CPUSeconds float64
	PeakRSS    int64
	Starts     int
	// Metrics is the last /metrics scraped before a stop.
	Metrics string
}

// Start runs the binary and waits until it is ready.
func (c *Controller) Start(ctx context.Context) error {
	addr := "127.0.0.1:9090"
	args := append([]string(nil), c.Side.Args...)
	if c.MetricsAddrFlag != "" {
		var err error
		if addr, err = proc.FreeAddr(); err != nil {
			return err
		}
		args = append(args, c.MetricsAddrFlag+"="+addr)
	}
	c.metricsURL = "http://" + addr
	p, err := proc.Run(proc.Spec{Bin: c.Side.Bin, Args: args, Kubeconfig: c.Kubeconfig, Out: c.Out,
		Prefix: c.Side.Name + " | ", Env: []string{"POD_NAME=loadtest-" + c.Side.Name}})
	if err != nil {
		return err
	}
	c.p = p
	c.Starts++
	return c.waitReady(ctx)
}

// waitReady polls /ready, or, for a binary without it, /metrics and then gives it 3 s.
func (c *Controller) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if st := c.p.ProcessState(); st != nil {
			return fmt.Errorf("%s exited: %v", c.Side.Bin, st)
		}
		if code := get(c.metricsURL + "/ready"); code == http.StatusOK {
			return nil
		} else if code == http.StatusNotFound && get(c.metricsURL+"/metrics") == http.StatusOK {
			time.Sleep(3 * time.Second)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return errors.New("controller not ready after 90s")
}

func get(url string) int {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Stop samples the process, scrapes /metrics and stops it with SIGTERM.
func (c *Controller) Stop() {
	if c.p == nil {
		return
	}
	cpu, rss, err := processStats(c.p.Pid())
	if err == nil {
		c.CPUSeconds += cpu
		c.PeakRSS = max(c.PeakRSS, rss)
	}
	cl := http.Client{Timeout: 5 * time.Second}
	if resp, err := cl.Get(c.metricsURL + "/metrics"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.Metrics = string(b)
	}
	c.p.Stop()
	c.p = nil
}

// processStats reads a live process's CPU seconds (user + system) and peak RSS in bytes.
func processStats(pid int) (float64, int64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the parenthesised command name; utime and stime are fields 14 and 15.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	const ticks = 100 // USER_HZ on Linux
	rss, err := StatusBytes(pid, "VmHWM")
	if err != nil {
		return 0, 0, err
	}
	return (utime + stime) / ticks, int64(rss), nil
}

// StatusBytes reads one memory field of /proc/<pid>/status (VmRSS, VmHWM, ...) in bytes.
func StatusBytes(pid int, field string) (uint64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, nil
		}
	}
	return 0, nil
}

// MetricValue sums the samples of one metric in a Prometheus text exposition.
func MetricValue(exposition, name string) (float64, bool) {
	sum, found := 0.0, false
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}
