package loadtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestLastScrapeSeesWhatTheShutdownFinished: a stopping process counts its last reload moments
// before its HTTP server closes, after scrapes that took longer than a second (a loaded
// machine). lastScrape keeps scraping until the connection is refused and returns the answer
// that counted most: the final count, not the one before it.
func TestLastScrapeSeesWhatTheShutdownFinished(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		count   = 1
		served  int
		counted = make(chan struct{}) // closed once a scrape has served the final count
		once    sync.Once
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n := count
		mu.Unlock()
		if n == 1 {
			time.Sleep(1200 * time.Millisecond) // draining on a busy machine
			mu.Lock()
			served++
			mu.Unlock()
		}
		fmt.Fprintf(w, "reloader_reload_executed_total{success=\"true\"} %d\n", n)
		if n == 2 {
			once.Do(func() { close(counted) })
		}
	})}
	go func() { _ = srv.Serve(l) }()
	go func() {
		// The shutdown: the last reload is counted after three slow scrapes, then, once a
		// scrape has begun after it, the server closes.
		for {
			mu.Lock()
			slowDone := served >= 3
			mu.Unlock()
			if slowDone {
				break
			}
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		count = 2
		mu.Unlock()
		<-counted
		// As controller-runtime stops its servers: no new connection, the answers in flight
		// sent.
		_ = srv.Shutdown(context.Background())
	}()

	c := &Controller{metricsURL: "http://" + l.Addr().String()}
	text, ok := c.lastScrape(20 * time.Second)
	if !ok {
		t.Fatal("no scrape answered")
	}
	if v, _ := MetricValue(text, "reloader_reload_executed_total"); v != 2 {
		t.Errorf("last scrape counted %v, want 2 (the count the shutdown finished): %q", v, text)
	}
}

func TestCounterSum(t *testing.T) {
	text := "# HELP a_total x\n# TYPE a_total counter\na_total 2\nb_total{k=\"v w\"} 3.5\ngauge 100\nc_total{x=\"1\",y=\"}\"} 1\n"
	if got := counterSum(text); got != 6.5 {
		t.Errorf("counterSum = %v, want 6.5 (2 + 3.5 + 1; the gauge left out)", got)
	}
}
