package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reloader-operator/reloader/internal/testutil"
)

func newPoster(t *testing.T, timeout time.Duration, attempts int, proxy string) *Poster {
	t.Helper()
	p, err := NewPoster(timeout, attempts, proxy)
	testutil.Must(t, err)
	p.Backoff = 10 * time.Millisecond
	return p
}

func TestPostRetriesServerErrorsThenSucceeds(t *testing.T) {
	var calls atomic.Int32
	var got Change
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s with Content-Type %q", r.Method, r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	w := Webhook{URL: srv.URL + "/hook", Poster: newPoster(t, time.Second, 3, "")}
	sent := Change{Kind: "ConfigMap", Namespace: "team-a", Name: "app", Hash: "abc",
		Workloads: []Workload{{Kind: "Deployment", Namespace: "team-a", Name: "api"}}}
	testutil.Must(t, w.Send(context.Background(), sent))
	if calls.Load() != 3 {
		t.Errorf("%d calls, want 3", calls.Load())
	}
	if got.Name != "app" || got.Hash != "abc" || len(got.Workloads) != 1 || got.Workloads[0].Name != "api" {
		t.Errorf("server received %+v", got)
	}
}

func TestPostGivesUp(t *testing.T) {
	cases := []struct {
		name      string
		status    int
		wantCalls int32
	}{
		{"server error after every attempt", http.StatusInternalServerError, 3},
		{"client error at once", http.StatusBadRequest, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				calls.Add(1)
				http.Error(w, "nope", c.status)
			}))
			defer srv.Close()
			err := newPoster(t, time.Second, 3, "").Post(context.Background(), srv.URL+"/secret-token", []byte(`{}`))
			var se *StatusError
			if !errors.As(err, &se) || se.Code != c.status {
				t.Fatalf("error %v, want status %d", err, c.status)
			}
			if strings.Contains(err.Error(), "secret-token") {
				t.Errorf("error leaks the URL path: %v", err)
			}
			if calls.Load() != c.wantCalls {
				t.Errorf("%d calls, want %d", calls.Load(), c.wantCalls)
			}
		})
	}
}

func TestPostFollowsNoRedirect(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.RedirectHandler(other.URL, http.StatusTemporaryRedirect))
	defer srv.Close()
	err := newPoster(t, time.Second, 2, "").Post(context.Background(), srv.URL, []byte(`{}`))
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusTemporaryRedirect {
		t.Errorf("error %v, want the redirect as a failure", err)
	}
	if elsewhere.Load() != 0 {
		t.Error("the redirect was followed")
	}
}

func TestPostTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	err := newPoster(t, 100*time.Millisecond, 2, "").Post(context.Background(), srv.URL, []byte(`{}`))
	if err == nil {
		t.Fatal("a server that never answers counted as delivered")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("gave up after %v", took)
	}
}

func TestPostThroughProxy(t *testing.T) {
	var proxied atomic.Value
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A forward proxy receives the absolute target URL.
		body, _ := io.ReadAll(r.Body)
		proxied.Store(r.URL.String() + " " + string(body))
	}))
	defer proxy.Close()
	err := newPoster(t, time.Second, 1, proxy.URL).Post(context.Background(), "http://hooks.invalid/services/x", []byte(`{"a":1}`))
	testutil.Must(t, err)
	if got, _ := proxied.Load().(string); got != `http://hooks.invalid/services/x {"a":1}` {
		t.Errorf("proxy saw %q", got)
	}
}

// TestErrorsNeverShowTheURLsSecrets: chat webhooks keep their token in the URL's path or
// query; no error text may carry either, whatever failed.
func TestErrorsNeverShowTheURLsSecrets(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no hook at "+r.URL.RequestURI(), http.StatusNotFound) // some servers echo it
	}))
	defer echo.Close()
	const path, query = "/services/T0PATHSECRET/B0/x9PATHTOKEN", "?token=QUERYSECRET&sig=QUERYSIG"
	tests := []struct{ name, target string }{
		{"unreachable", "http://127.0.0.1:1" + path + query},
		{"no such host", "https://reloader-test.invalid" + path + query},
		{"error answer echoing the URL", echo.URL + path + query},
		{"unparsable", "http://host" + path + "%zz" + query},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newPoster(t, 2*time.Second, 1, "").Post(context.Background(), tt.target, []byte("{}"))
			if err == nil {
				t.Fatal("no error")
			}
			for _, secret := range []string{"PATHSECRET", "PATHTOKEN", "QUERYSECRET", "QUERYSIG", "/services"} {
				if strings.Contains(err.Error(), secret) || strings.Contains(fmt.Sprintf("%+v", err), secret) {
					t.Errorf("error shows %s: %v", secret, err)
				}
			}
			t.Log(err)
		})
	}
	_, err := NewPoster(time.Second, 1, "http://user:PROXYPASSWORD@proxy:3128/%zz")
	if err == nil || strings.Contains(err.Error(), "PROXYPASSWORD") {
		t.Errorf("bad proxy URL: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.slack.com/services/T0/B0/XXXX":      "https://hooks.slack.com/…",
		"https://example.com:8443/hook?token=abc":          "https://example.com:8443/…",
		"https://user:pass@example.com/":                   "https://example.com/…",
		"no url at all":                                    "<invalid URL>",
		"https://outlook.office.com/webhook/%zz/IncomingX": "<invalid URL>",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
