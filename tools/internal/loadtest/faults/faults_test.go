package faults

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/reloader-operator/reloader/internal/testutil"
)

// upstream answers 200, and streams a watch until the client goes away.
func upstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
					_, _ = io.WriteString(w, "{}\n")
					w.(http.Flusher).Flush()
				}
			}
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func start(t *testing.T) *Proxy {
	p, err := Start(&rest.Config{Host: upstream(t).URL})
	testutil.Must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func get(t *testing.T, url string) (*http.Response, time.Duration) {
	t.Helper()
	start := time.Now()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	testutil.Must(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, time.Since(start)
}

func TestFaults(t *testing.T) {
	p := start(t)
	if resp, _ := get(t, p.URL+"/api/v1/configmaps"); resp.StatusCode != 200 {
		t.Fatalf("faults off: %d", resp.StatusCode)
	}

	p.Set(Config{TooManyRequests: 1, RetryAfterSeconds: 2})
	resp, _ := get(t, p.URL+"/api/v1/configmaps")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("429 share 1: got %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	p.Set(Config{ServerErrors: 1})
	codes := map[int]int{}
	for range 4 {
		resp, _ := get(t, p.URL+"/api/v1/secrets")
		codes[resp.StatusCode]++
	}
	if codes[500] != 2 || codes[503] != 2 {
		t.Errorf("5xx share 1: codes %v, want two 500 and two 503", codes)
	}

	p.Set(Config{Latency: 200 * time.Millisecond})
	if resp, took := get(t, p.URL+"/api/v1/pods"); resp.StatusCode != 200 || took < 200*time.Millisecond {
		t.Errorf("latency: %d after %v", resp.StatusCode, took)
	}

	p.Set(Config{QPS: 1, Burst: 2})
	codes = map[int]int{}
	for range 5 {
		resp, _ := get(t, p.URL+"/api/v1/nodes")
		codes[resp.StatusCode]++
	}
	if codes[200] != 2 || codes[429] != 3 {
		t.Errorf("QPS 1 burst 2, five requests at once: codes %v", codes)
	}
	// Leader election has a priority level of its own.
	if resp, _ := get(t, p.URL+"/apis/coordination.k8s.io/v1/namespaces/x/leases/reloader"); resp.StatusCode != 200 {
		t.Errorf("a lease renewal over the QPS limit: %d", resp.StatusCode)
	}

	p.Clear()
	before := p.Stats()
	if resp, _ := get(t, p.URL+"/api/v1/configmaps"); resp.StatusCode != 200 {
		t.Errorf("after Clear: %d", resp.StatusCode)
	}
	st := p.Stats()
	if st.Retries != before.Retries+1 {
		t.Errorf("the same request after its 429 is a retry: %d then %d", before.Retries, st.Retries)
	}
	if st.TooManyRequests != 1 || st.ServerErrors != 4 || st.Throttled != 3 || st.Delayed != 1 || st.Injected != 8 {
		t.Errorf("stats %+v", st)
	}
}

// A watch opened before the faults are turned on is cut once they are; none is cut while
// they are off.
func TestWatchCut(t *testing.T) {
	p := start(t)
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(p.URL + "/api/v1/configmaps?watch=true")
	testutil.Must(t, err)
	defer resp.Body.Close()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("stream ended with faults off: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	on := time.Now()
	p.Set(Config{DropWatchAfter: time.Millisecond}) // cut 1 s (the floor) plus at most 1 ms after arming
	select {
	case err := <-done:
		took := time.Since(on)
		if err == nil || took < time.Second || took > 5*time.Second {
			t.Errorf("stream ended %v after faults on, with %v; want cut (an error) after about 1 s", took, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream not cut 10 s after faults on")
	}
	if p.Stats().WatchesDropped != 1 {
		t.Errorf("stats %+v", p.Stats())
	}
}
