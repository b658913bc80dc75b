package metricsauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestBearerToken(t *testing.T) {
	for _, tt := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer  abc ", "abc", true},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
	} {
		if token, ok := bearerToken(tt.header); token != tt.token || ok != tt.ok {
			t.Errorf("%q: %q %v, want %q %v", tt.header, token, ok, tt.token, tt.ok)
		}
	}
}

// Decisions are cached by token, verb and path; errors are not cached.
func TestGuardCachesDecisions(t *testing.T) {
	calls := 0
	fail := false
	g := newGuard(func(_ context.Context, token, verb, path string) (int, error) {
		calls++
		if fail {
			return 0, errors.New("API server down")
		}
		if token == "good" && verb == "get" && path == "/metrics" {
			return http.StatusOK, nil
		}
		return http.StatusForbidden, nil
	})
	for _, tt := range []struct {
		r     *http.Request
		code  int
		calls int
	}{
		{req("GET", "/metrics", ""), http.StatusUnauthorized, 0},
		{req("GET", "/metrics", "good"), http.StatusOK, 1},
		{req("GET", "/metrics", "good"), http.StatusOK, 1},
		{req("POST", "/metrics", "good"), http.StatusForbidden, 2},
		{req("GET", "/metrics", "other"), http.StatusForbidden, 3},
	} {
		if code, err := g.check(tt.r); code != tt.code || err != nil || calls != tt.calls {
			t.Errorf("%s %s: %d %v after %d calls, want %d after %d", tt.r.Method, tt.r.Header.Get("Authorization"), code, err, calls, tt.code, tt.calls)
		}
	}
	fail = true
	for range 2 {
		if code, err := g.check(req("GET", "/metrics", "new")); code != http.StatusInternalServerError || err == nil {
			t.Errorf("API server down: %d %v", code, err)
		}
	}
	if calls != 5 {
		t.Errorf("%d calls, want a retry after an error (5)", calls)
	}
}

func req(method, path, token string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// A flood of junk tokens, each denied and cached, makes room one entry at a time: a real
// scraper's decision stays cached and costs no further review, and the cache stays bounded.
func TestGuardEvictsSingleEntries(t *testing.T) {
	var mu sync.Mutex
	reviewed := map[string]int{}
	g := newGuard(func(_ context.Context, token, _, _ string) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		reviewed[token]++
		if token == "scraper" {
			return http.StatusOK, nil
		}
		return http.StatusUnauthorized, nil
	})
	if code, err := g.check(req("GET", "/metrics", "scraper")); code != http.StatusOK || err != nil {
		t.Fatalf("scraper: %d %v", code, err)
	}
	for i := range 3 * maxEntries {
		if code, err := g.check(req("GET", "/metrics", fmt.Sprintf("junk-%d", i))); code != http.StatusUnauthorized || err != nil {
			t.Fatalf("junk token %d: %d %v", i, code, err)
		}
		if n := len(g.decisions); n > maxEntries {
			t.Fatalf("%d decisions cached, over %d", n, maxEntries)
		}
	}
	if code, err := g.check(req("GET", "/metrics", "scraper")); code != http.StatusOK || err != nil {
		t.Fatalf("scraper after the flood: %d %v", code, err)
	}
	if n := reviewed["scraper"]; n != 1 {
		t.Errorf("the scraper's token was reviewed %d times, want once: the flood evicted its decision", n)
	}
	if n := len(g.decisions); n != maxEntries {
		t.Errorf("%d decisions cached after the flood, want %d (one at a time evicted)", n, maxEntries)
	}
}

// Reviews in flight are bounded: once maxReviews wait on the API server, a request whose
// decision is not cached gets 503 without a review, one whose decision is cached still
// passes, and a slot freed serves the next.
func TestGuardBoundsReviewsInFlight(t *testing.T) {
	release := make(chan struct{})
	started := make(chan string, 2*maxReviews)
	var calls atomic.Int32
	g := newGuard(func(_ context.Context, token, _, _ string) (int, error) {
		calls.Add(1)
		if strings.HasPrefix(token, "slow-") {
			started <- token
			<-release
		}
		return http.StatusOK, nil
	})
	if code, _ := g.check(req("GET", "/metrics", "scraper")); code != http.StatusOK {
		t.Fatalf("scraper: %d", code)
	}
	var wg sync.WaitGroup
	for i := range maxReviews {
		wg.Go(func() {
			if code, err := g.check(req("GET", "/metrics", fmt.Sprintf("slow-%d", i))); code != http.StatusOK || err != nil {
				t.Errorf("slow review %d: %d %v", i, code, err)
			}
		})
	}
	for range maxReviews {
		<-started
	}
	if code, err := g.check(req("GET", "/metrics", "one-more")); code != http.StatusServiceUnavailable || err != nil {
		t.Errorf("a review past the bound: %d %v, want 503", code, err)
	}
	if n := calls.Load(); n != 1+maxReviews {
		t.Errorf("%d reviews, want %d: the request past the bound was reviewed", n, 1+maxReviews)
	}
	if code, _ := g.check(req("GET", "/metrics", "scraper")); code != http.StatusOK {
		t.Errorf("a cached scraper while reviews are busy: %d, want 200", code)
	}
	close(release)
	wg.Wait()
	if code, err := g.check(req("GET", "/metrics", "one-more")); code != http.StatusOK || err != nil {
		t.Errorf("after the reviews ended: %d %v, want 200", code, err)
	}
}
