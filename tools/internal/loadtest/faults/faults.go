// Package faults is a fault-injecting reverse proxy between a controller and its API server:
// it answers some requests with 429 (and Retry-After) or 500/503 itself, delays others, limits
// the request rate, and cuts watch streams, at rates a load-test scenario sets. The controller
// talks plain HTTP to the proxy on loopback; the proxy talks to the API server with the
// controller's own credentials, so the API server's audit log still names the controller.
package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"
)

// Config sets the faults; the rates are shares of requests, 0 to 1.
type Config struct {
	// TooManyRequests answers this share of requests 429 with Retry-After: RetryAfterSeconds.
	TooManyRequests   float64 `json:"tooManyRequests,omitempty"`
	RetryAfterSeconds int     `json:"retryAfterSeconds,omitempty"`
	// ServerErrors answers this share 500 or 503 (in turn).
	ServerErrors float64 `json:"serverErrors,omitempty"`
	// Latency is added to this share of requests (LatencyShare; 0 means all).
	Latency      time.Duration `json:"latency,omitempty"`
	LatencyShare float64       `json:"latencyShare,omitempty"`
	// QPS limits the requests that reach the API server (watches and leader-election leases
	// aside); those over it get 429. Burst is the bucket's size. 0: no limit.
	QPS   float64 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// DropWatchAfter cuts each watch stream, open or opened while faults are on, after 1 s
	// plus a random time up to this. 0: never.
	DropWatchAfter time.Duration `json:"dropWatchAfter,omitempty"`
	// Seed makes the random choices repeatable.
	Seed uint64 `json:"seed,omitempty"`
}

// Stats counts what the proxy did.
type Stats struct {
	Requests        int `json:"requests"`
	TooManyRequests int `json:"tooManyRequests"`
	ServerErrors    int `json:"serverErrors"`
	Throttled       int `json:"throttled"`
	Delayed         int `json:"delayed"`
	WatchesDropped  int `json:"watchesDropped"`
	// Retries are requests for the same method and URL as one that got an injected fault in
	// the 60 s before it: the controller trying again.
	Retries int `json:"retries"`
	// Injected counts the requests the proxy answered itself (429s, 5xx, throttled).
	Injected int `json:"injected"`
}

// Proxy is a running fault proxy.
type Proxy struct {
	// URL is where the controller connects: http://127.0.0.1:port.
	URL string

	srv *http.Server
	ln  net.Listener

	mu      sync.Mutex
	cfg     Config
	on      bool
	rng     *rand.Rand
	limiter *rate.Limiter
	stats   Stats
	faulted map[string]time.Time // method+URL -> last injected fault
	turn    int
	streams map[*stream]struct{}
	done    chan struct{}
}

// Start listens on a free loopback port and forwards to the API server of target, with its
// credentials. Faults are off until Set.
func Start(target *rest.Config) (*Proxy, error) {
	upstream, err := url.Parse(target.Host)
	if err != nil {
		return nil, fmt.Errorf("fault proxy: API server address: %w", err)
	}
	if upstream.Scheme == "" {
		upstream.Scheme = "https"
	}
	transport, err := rest.TransportFor(target)
	if err != nil {
		return nil, fmt.Errorf("fault proxy: transport: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), ln: ln, faulted: map[string]time.Time{}, rng: rand.New(rand.NewPCG(1, 2)),
		streams: map[*stream]struct{}{}, done: make(chan struct{})}
	go p.cutter(p.done)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = upstream.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watch events pass at once
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = p.track(resp.Request, resp.Body)
			return nil
		},
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if !errors.Is(err, errCut) {
				http.Error(w, err.Error(), http.StatusBadGateway)
			}
		},
	}
	p.srv = &http.Server{Handler: p.handler(rp), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Set turns faults on with cfg.
func (p *Proxy) Set(cfg Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg, p.on = cfg, true
	p.rng = rand.New(rand.NewPCG(cfg.Seed, 7))
	p.limiter = nil
	if cfg.QPS > 0 {
		p.limiter = rate.NewLimiter(rate.Limit(cfg.QPS), max(cfg.Burst, 1))
	}
}

// Clear turns faults off; requests pass untouched.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = false
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops the proxy.
func (p *Proxy) Close() error {
	close(p.done)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		return p.srv.Close()
	}
	return nil
}

// Kubeconfig writes a kubeconfig that points at the proxy (no credentials: the proxy adds
// them) into dir and returns its path.
func (p *Proxy) Kubeconfig(dir, name string) (string, error) {
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: %s
contexts:
- name: proxy
  context:
    cluster: proxy
    user: proxy
users:
- name: proxy
  user: {}
current-context: proxy
`, p.URL)
	path := filepath.Join(dir, "kubeconfig-"+name+"-via-fault-proxy")
	return path, os.WriteFile(path, []byte(content), 0o600)
}

// decision is what the proxy does with one request.
type decision struct {
	status     int
	retryAfter int
	delay      time.Duration
}

// isLease reports a leader-election request: API priority and fairness gives those a level
// of their own, so the QPS limit, which stands for it, leaves them alone.
func isLease(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/apis/coordination.k8s.io/") && strings.Contains(r.URL.Path, "/leases")
}

func isWatch(r *http.Request) bool {
	return r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1"
}

func (p *Proxy) decide(r *http.Request) decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests++
	key := r.Method + " " + r.URL.RequestURI()
	now := time.Now()
	if t, ok := p.faulted[key]; ok {
		if now.Sub(t) < time.Minute {
			p.stats.Retries++
		}
		delete(p.faulted, key)
	}
	if !p.on {
		return decision{}
	}
	var d decision
	c := p.cfg
	switch x := p.rng.Float64(); {
	case x < c.TooManyRequests:
		d.status, d.retryAfter = http.StatusTooManyRequests, max(c.RetryAfterSeconds, 1)
		p.stats.TooManyRequests++
	case x < c.TooManyRequests+c.ServerErrors:
		p.turn++
		d.status = http.StatusInternalServerError
		if p.turn%2 == 0 {
			d.status = http.StatusServiceUnavailable
		}
		p.stats.ServerErrors++
	case p.limiter != nil && !isWatch(r) && !isLease(r) && !p.limiter.AllowN(now, 1):
		d.status, d.retryAfter = http.StatusTooManyRequests, 1
		p.stats.Throttled++
	}
	if d.status != 0 {
		p.stats.Injected++
		p.faulted[key] = now
		if len(p.faulted) > 100000 { // bounded: forget the oldest half at worst
			for k, t := range p.faulted {
				if now.Sub(t) > 30*time.Second {
					delete(p.faulted, k)
				}
			}
		}
		return d
	}
	if c.Latency > 0 && (c.LatencyShare == 0 || p.rng.Float64() < c.LatencyShare) {
		d.delay = c.Latency
		p.stats.Delayed++
	}
	return d
}

// track registers a watch stream so that the proxy can cut it while faults are on,
// including streams opened before the faults were turned on.
func (p *Proxy) track(r *http.Request, body io.ReadCloser) io.ReadCloser {
	if r == nil || !isWatch(r) {
		return body
	}
	s := &stream{ReadCloser: body, proxy: p}
	p.mu.Lock()
	p.streams[s] = struct{}{}
	p.mu.Unlock()
	return s
}

// cutter arms each live watch stream with a random time to live while faults with
// DropWatchAfter are on, and cuts those whose time is up; once a second, until the proxy
// closes.
func (p *Proxy) cutter(done <-chan struct{}) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		now := time.Now()
		var cut []*stream
		p.mu.Lock()
		for s := range p.streams {
			switch {
			case !p.on || p.cfg.DropWatchAfter <= 0:
				s.deadline = time.Time{}
			case s.deadline.IsZero():
				s.deadline = now.Add(time.Second + time.Duration(p.rng.Int64N(int64(p.cfg.DropWatchAfter))))
			case now.After(s.deadline):
				cut = append(cut, s)
				delete(p.streams, s)
				s.cut = true
				p.stats.WatchesDropped++
			}
		}
		p.mu.Unlock()
		for _, s := range cut {
			_ = s.ReadCloser.Close()
		}
	}
}

var errCut = errors.New("watch stream cut by the fault proxy")

// stream is a watch response body the proxy may cut: closing the upstream body ends a Read
// blocked on a quiet stream too, and the reverse proxy then aborts the response.
type stream struct {
	io.ReadCloser
	proxy    *Proxy
	deadline time.Time // guarded by proxy.mu
	cut      bool      // guarded by proxy.mu
}

func (s *stream) Read(b []byte) (int, error) {
	n, err := s.ReadCloser.Read(b)
	if err != nil {
		s.proxy.mu.Lock()
		cut := s.cut
		s.proxy.mu.Unlock()
		if cut {
			return n, errCut
		}
	}
	return n, err
}

func (s *stream) Close() error {
	s.proxy.mu.Lock()
	delete(s.proxy.streams, s)
	s.proxy.mu.Unlock()
	return s.ReadCloser.Close()
}

func (p *Proxy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := p.decide(r)
		if d.delay > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(d.delay):
			}
		}
		if d.status != 0 {
			if d.retryAfter > 0 {
				w.Header().Set("Retry-After", fmt.Sprint(d.retryAfter))
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(d.status)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the load test's fault proxy","reason":%q,"code":%d}`,
				reason(d.status), d.status)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func reason(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "TooManyRequests"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailable"
	}
	return "InternalError"
}
