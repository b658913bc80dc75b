package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/reloader-operator/reloader/internal/testenv/proc"
)

// Side is one build under test.
type Side struct {
	// Name is "old" or "new".
	Name string
	Bin  string
	Args []string
	// MetricsAddrFlag, when set, is the flag that sets this binary's metrics address ("" for
	// none, as upstream's binary, which listens on :9090); nil takes the run's
	// (Config.MetricsAddrFlag).
	MetricsAddrFlag *string
}

// fixedMetricsAddr is where a binary without a metrics-address flag serves /metrics (upstream
// Reloader's constants.DefaultHttpListenAddr).
const fixedMetricsAddr = "127.0.0.1:9090"

// Controller runs one side's binary and measures its process.
type Controller struct {
	Side       Side
	Kubeconfig string
	// MetricsAddrFlag is the flag that sets the binary's metrics address; empty when the binary
	// has none (it then listens on :9090).
	MetricsAddrFlag string
	Out             io.Writer
	// Args are the arguments of the last start.
	Args []string

	p          *proc.Process
	metricsURL string
	// CPUSeconds adds up every run of the process; PeakRSS is the highest of any.
	CPUSeconds float64
	PeakRSS    int64
	Starts     int
	// Metrics is the last /metrics scraped as the process stopped (during its shutdown, after SIGTERM).
	Metrics string

	// The sampler reads /proc every second and /metrics every other second, across restarts:
	// the counters of each process that stopped are kept in done and added to the running
	// one's, so a restart loses nothing.
	mu          sync.Mutex
	samples     []Sample
	done        Scrape
	current     Scrape
	stopSampler context.CancelFunc
	sampling    sync.WaitGroup
}

// Sample is the controller's state at one moment; counters add up every run so far.
type Sample struct {
	At time.Time
	// CPU is the CPU seconds of every run so far; RSS the running process's resident bytes.
	CPU float64
	RSS int64
	// Metrics is nil when /metrics was not read at this moment.
	Metrics *Scrape
}

// maxSamples bounds the samples kept (over five hours at one a second).
const maxSamples = 20000

// Start runs the binary and waits until it is ready.
func (c *Controller) Start(ctx context.Context) error {
	addr := fixedMetricsAddr
	args := append([]string(nil), c.Side.Args...)
	if c.MetricsAddrFlag == "" {
		// Another process on the port would answer the scrapes in the binary's place (and the
		// binary, upstream's, exits when it cannot listen).
		if err := portFree(addr); err != nil {
			return fmt.Errorf("%s takes no metrics-address flag and serves /metrics on :9090, which is in use: %w", c.Side.Bin, err)
		}
	} else {
		var err error
		if addr, err = proc.FreeAddr(); err != nil {
			return err
		}
		args = append(args, c.MetricsAddrFlag+"="+addr)
	}
	c.metricsURL = "http://" + addr
	c.Args = args
	p, err := proc.Run(proc.Spec{Bin: c.Side.Bin, Args: args, Kubeconfig: c.Kubeconfig, Out: c.Out,
		Prefix: c.Side.Name + " | ", Env: []string{"POD_NAME=loadtest-" + c.Side.Name}})
	if err != nil {
		return err
	}
	c.p = p
	c.Starts++
	c.mu.Lock()
	c.current = Scrape{}
	c.mu.Unlock()
	sctx, cancel := context.WithCancel(context.Background())
	c.stopSampler = cancel
	c.sampling.Add(1)
	go c.sample(sctx, p.Pid())
	return c.waitReady(ctx)
}

// portFree fails when something listens on addr's port, on any address.
func portFree(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	return l.Close()
}

// sample records the process every second until ctx ends.
func (c *Controller) sample(ctx context.Context, pid int) {
	defer c.sampling.Done()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		cpu, _, err := processStats(pid)
		if err != nil {
			continue
		}
		rss, _ := StatusBytes(pid, "VmRSS")
		var scraped *Scrape
		if i%2 == 1 {
			if text, ok := c.scrape(2 * time.Second); ok {
				sc := newScrape(text)
				scraped = &sc
			}
		}
		c.mu.Lock()
		if scraped != nil {
			c.current = *scraped
			total := c.done.add(c.current)
			scraped = &total
		}
		if len(c.samples) < maxSamples {
			c.samples = append(c.samples, Sample{At: time.Now(), CPU: c.CPUSeconds + cpu, RSS: int64(rss), Metrics: scraped})
		}
		c.mu.Unlock()
	}
}

func (c *Controller) scrape(timeout time.Duration) (string, bool) {
	text, err := c.scrapeErr(timeout)
	return text, err == nil
}

// lastScrapers is how many scrape a stopping process at once: the last counts land moments
// before its HTTP server closes, and a scrape begun in that window is what shows them.
const lastScrapers = 3

// lastScrapePause is how long a scraper of a stopping process waits between its scrapes:
// short beside the seconds a shutdown takes, long beside a scrape, so that three scrapers
// do not load the process they wait for.
const lastScrapePause = 20 * time.Millisecond

// lastScrape scrapes a process told to stop until its /metrics refuses connections (or for
// at most limit), and returns the answer that counted most: counters only grow, so the
// answer with the highest sum of counters (`*_total`) was read last (of equal sums, the
// scrape begun last). Only a refused connection ends it: a scrape that times out while the
// process drains (a loaded machine) is not the server gone, and stopping there lost the last
// counts.
func (c *Controller) lastScrape(limit time.Duration) (string, bool) {
	var (
		mu     sync.Mutex
		text   string
		best   = -1.0
		begun  time.Time
		wg     sync.WaitGroup
		closed = make(chan struct{})
		once   sync.Once
	)
	deadline := time.Now().Add(limit)
	for i := range lastScrapers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * lastScrapePause / lastScrapers) // staggered
			for time.Now().Before(deadline) {
				select {
				case <-closed:
					return
				default:
				}
				start := time.Now()
				got, err := c.scrapeErr(5 * time.Second)
				switch {
				case err == nil:
					sum := counterSum(got)
					mu.Lock()
					if sum > best || sum == best && start.After(begun) {
						text, best, begun = got, sum, start
					}
					mu.Unlock()
				case errors.Is(err, syscall.ECONNREFUSED):
					once.Do(func() { close(closed) })
					return
				}
				time.Sleep(lastScrapePause) // reset or timed out: still draining
			}
		}()
	}
	wg.Wait()
	return text, best >= 0
}

// counterSum adds the values of an exposition's counters (series whose name ends in
// `_total`).
func counterSum(text string) float64 {
	sum := 0.0
	for _, m := range parseExposition(text) {
		if strings.HasSuffix(m.Name, "_total") {
			sum += m.Value
		}
	}
	return sum
}

// scrapeErr is scrape saying why it got nothing.
func (c *Controller) scrapeErr(timeout time.Duration) (string, error) {
	cl := http.Client{Timeout: timeout}
	resp, err := cl.Get(c.metricsURL + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("/metrics: status %d", resp.StatusCode)
	}
	return string(b), err
}

// Samples returns what the sampler recorded.
func (c *Controller) Samples() []Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Sample(nil), c.samples...)
}

// Totals are the metrics of every run so far: the stopped runs' last scrapes plus the
// running one's latest.
func (c *Controller) Totals() Scrape {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done.add(c.current)
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

// Stop samples the process, scrapes /metrics and stops it with SIGTERM, scraping on until
// /metrics no longer answers.
func (c *Controller) Stop() { c.stop(false) }

// Kill samples the process, scrapes /metrics and kills it with SIGKILL: no shutdown, as when
// a node dies or the OOM killer strikes.
func (c *Controller) Kill() { c.stop(true) }

func (c *Controller) stop(kill bool) {
	if c.p == nil {
		return
	}
	c.stopSampler()
	c.sampling.Wait()
	cpu, rss, err := processStats(c.p.Pid())
	if err == nil {
		c.CPUSeconds += cpu
		c.PeakRSS = max(c.PeakRSS, rss)
	}
	text, ok := c.scrape(5 * time.Second)
	if !kill {
		// A reconcile in flight at SIGTERM finishes during the shutdown, after the scrape
		// above: scrape on while /metrics answers (controller-runtime stops its HTTP servers
		// after the controllers), so that the last scrape counts what the shutdown finished.
		c.p.Terminate()
		if last, answered := c.lastScrape(30 * time.Second); answered {
			text, ok = last, true
		}
	}
	c.mu.Lock()
	if ok {
		c.Metrics = text
		c.current = newScrape(text)
	}
	c.done = c.done.add(c.current)
	c.current = Scrape{}
	c.mu.Unlock()
	if kill {
		c.p.Kill()
	} else {
		c.p.Stop()
	}
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
	return MetricValueWith(exposition, name, "")
}

// MetricValueWith sums the samples of one metric whose line contains label (`kind="Secret"`).
func MetricValueWith(exposition, name, label string) (float64, bool) {
	sum, found := 0.0, false
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, name) || !strings.Contains(line, label) {
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
